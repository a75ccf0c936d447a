#!/usr/bin/env node
// Opens a profile in speedscope, as a person would, and says whether it
// parsed: node check.js [--view time-ordered|left-heavy|sandwich] [--depth]
// PROFILE SCREENSHOT.png (the view screenshot shows; time-ordered by
// default)
//
// speedscope's own release (node_modules/speedscope/dist/release) is served
// from 127.0.0.1 with the profile beside it, and Debian's chromium, driven
// by playwright-core, opens it with #profileURL=. The profile parsed when
// speedscope names the importer it chose, sets the page title to the
// profile's name and draws it; it did not when speedscope raises an alert
// ("Unrecognized format!", "... it's empty!"), shows "Something went wrong"
// or never finishes. On success the screenshot is written and one JSON line
// on stdout tells what the page shows: the importer, the title, the
// profiles (threads) listed in the toolbar, the number of frames and the
// heaviest frames of the sandwich view's table. With --depth, each profile
// also has the depth of its time-ordered view: how many frames deep its
// stack gets, from what speedscope itself exports (Ctrl+S, its own file
// format) of what it imported. On failure: exit 1 and one line on stderr
// saying why.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const RELEASE = path.join(__dirname, 'node_modules', 'speedscope', 'dist',
	'release');
const TIMEOUT_MS = 60000;
// speedscope's sandwich table: one row of this many CSS px per frame.
const ROW_PX = 20;

function fail(why) {
	process.stderr.write(`speedscope check: ${why}\n`);
	process.exit(1);
}

const TYPES = {
	'.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
	'.json': 'application/json', '.wasm': 'application/wasm',
	'.png': 'image/png', '.ico': 'image/x-icon', '.woff2': 'font/woff2',
};

// The release's files by name, and the profile under /profile/<its name>.
function serve(profile) {
	const files = new Map();
	for (const f of fs.readdirSync(RELEASE))
		files.set('/' + f, path.join(RELEASE, f));
	const name = path.basename(profile);
	files.set('/profile/' + name, profile);
	const server = http.createServer((req, res) => {
		let p = new URL(req.url, 'http://127.0.0.1').pathname;
		try {
			p = decodeURIComponent(p);
		} catch (e) {
			p = null;
		}
		const file = files.get(p === '/' ? '/index.html' : p);
		if (!file) {
			res.writeHead(404);
			res.end();
			return;
		}
		res.writeHead(200, {
			'Content-Type': TYPES[path.extname(file)] ||
				'application/octet-stream',
		});
		fs.createReadStream(file).pipe(res);
	});
	return new Promise((resolve, reject) => {
		server.on('error', reject);
		server.listen(0, '127.0.0.1', () => resolve({
			server, profileUrl: '/profile/' + encodeURIComponent(name) }));
	});
}

async function main() {
	const args = process.argv.slice(2);
	let view = 'time-ordered', depth = false;
	if (args[0] === '--view')
		view = args.splice(0, 2)[1];
	if (args[0] === '--depth')
		depth = !!args.splice(0, 1);
	const [profile, shot] = args;
	if (!profile || !shot || args.length !== 2 ||
			!['time-ordered', 'left-heavy', 'sandwich'].includes(view))
		fail('usage: node check.js [--view time-ordered|left-heavy|sandwich] ' +
			'[--depth] PROFILE SCREENSHOT.png');
	if (!fs.existsSync(profile))
		fail(`no such profile: ${profile}`);
	if (!fs.existsSync(path.join(RELEASE, 'index.html')))
		fail(`speedscope is not installed (${RELEASE}): npm ci in ${__dirname}`);
	if (!fs.existsSync(CHROMIUM))
		fail(`no chromium at ${CHROMIUM} (Debian package chromium)`);
	const { chromium } = require('playwright-core');

	const { server, profileUrl } = await serve(profile);
	const base = `http://127.0.0.1:${server.address().port}`;
	const browser = await chromium.launch({
		executablePath: CHROMIUM,
		headless: true,
		// No sandbox as root; no calls home (this machine's network is
		// closed); WebGL, which speedscope draws with, by SwiftShader.
		args: ['--no-sandbox', '--no-first-run', '--disable-sync',
			'--disable-background-networking', '--disable-component-update',
			'--disable-quic', '--use-angle=swiftshader',
			'--enable-unsafe-swiftshader'],
	});
	let result;
	try {
		result = await check(browser, base, profileUrl, view, shot, depth);
	} catch (e) {
		result = { error: String(e && e.message || e).split('\n')[0] };
	} finally {
		await browser.close();
		server.close();
	}
	if (result.error)
		fail(result.error);
	process.stdout.write(JSON.stringify(result.info) + '\n');
}

// Polls probe() in the page until it returns something truthy, an alert
// comes up, or the deadline passes: then the error says what was awaited.
async function until(page, events, deadline, what, probe, arg) {
	for (;;) {
		if (events.alert)
			throw new Error(`speedscope said: ${events.alert}`);
		const v = await page.evaluate(probe, arg);
		if (v)
			return v;
		if (Date.now() > deadline)
			throw new Error(`${what} not seen after ${TIMEOUT_MS / 1000}s` +
				(events.errors.length ? ` (${events.errors[0]})` : ''));
		await page.waitForTimeout(100);
	}
}

// Profile i (from 1) in the sandwich view, run in the page: its name in
// the toolbar (followed by "(i/N)" when the file holds N profiles), its
// number of frames and its heaviest frames by self time. null until the
// table of profile i is there.
function sandwich([rowPx, i]) {
	// The toolbar's lines come first: the view tabs, the profile's name,
	// the buttons.
	const app = document.querySelector('body > div');
	const center = app ? app.innerText.split('\n')[1] || '' : '';
	const m = /^(.*) \((\d+)\/(\d+)\)$/.exec(center);
	if (m && Number(m[2]) !== i)
		return null;
	// The table: a header table, then a scroll view holding a box of the
	// whole list's height (rowPx a frame), holding the rows on screen.
	const th = [...document.querySelectorAll('th')]
		.find(t => t.textContent.endsWith('Symbol Name'));
	const list = th && th.closest('table').nextElementSibling;
	const box = list && list.firstElementChild;
	const rows = list ? [...list.querySelectorAll('tr')]
		.filter(r => r.querySelectorAll('td').length === 3) : [];
	if (!box || !rows.length)
		return null;
	return {
		name: m ? m[1] : center,
		count: m ? Number(m[3]) : 1,
		frames: parseFloat(box.style.height) / rowPx,
		top: rows.slice(0, 5).map(r => r.lastElementChild.textContent),
	};
}

// The deepest stack of each profile speedscope exported (its file format:
// evented profiles open and close frames, sampled ones list stacks).
function exportedDepths(file) {
	const out = [];
	for (const p of file.profiles) {
		let d = 0, max = 0;
		if (p.type === 'evented') {
			for (const e of p.events) {
				d += e.type === 'O' ? 1 : -1;
				max = Math.max(max, d);
			}
		} else {
			for (const s of p.samples)
				max = Math.max(max, s.length);
		}
		out.push({ name: p.name, depth: max });
	}
	return out;
}

async function check(browser, base, profileUrl, view, shot, depth) {
	const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
	const events = { importer: null, alert: null, errors: [] };
	page.on('dialog', d => {
		events.alert = d.message();
		d.dismiss().catch(() => {});
	});
	page.on('console', m => {
		const t = m.text();
		const imp = /^Importing as (.*)$/.exec(t);
		if (imp)
			events.importer = imp[1];
		else if (m.type() === 'error' || /^Failed to load/.test(t))
			events.errors.push(t);
	});
	page.on('pageerror', e => events.errors.push(String(e)));

	await page.goto(`${base}/index.html#profileURL=` +
		encodeURIComponent(base + profileUrl) + `&view=${view}`);
	const deadline = Date.now() + TIMEOUT_MS;

	// Loaded: the title names the profile. Not loaded: an alert (unknown
	// format, empty profile) or the error view.
	const state = await until(page, events, deadline, 'the profile\'s title',
		() => {
			if (document.body.innerText.includes('Something went wrong'))
				return 'wrong';
			return document.title.endsWith(' - speedscope') ? 'loaded' : null;
		});
	if (state === 'wrong')
		return { error: 'speedscope shows "Something went wrong" (' +
			(events.errors[0] || 'no message') + ')' };

	// Drawn: the flame chart's 2D overlay (time axis, frame labels) has ink,
	// the same amount twice in a row (the labels come with the frames).
	const ink = await until(page, events, deadline, 'a drawn flame chart', () => {
		let n = 0;
		for (const c of document.querySelectorAll('canvas')) {
			const ctx = c.width && c.height && c.getContext('2d');
			if (!ctx)
				continue;
			const d = ctx.getImageData(0, 0, c.width, c.height).data;
			for (let i = 3; i < d.length; i += 4)
				if (d[i])
					n++;
		}
		const stable = n > 0 && n === window.rfbpfInk;
		window.rfbpfInk = n;
		return stable ? n : 0;
	});
	// The WebGL frames under the labels: 200 ms was not always enough
	// under a loaded CI run (a blank chart, labels only).
	await page.waitForTimeout(1000);
	if (!events.importer)
		return { error: 'speedscope named no importer' };
	await page.screenshot({ path: shot });

	let depths;
	if (depth) {
		const [download] = await Promise.all([
			page.waitForEvent('download', { timeout: TIMEOUT_MS }),
			page.keyboard.press('Control+s'),
		]);
		const file = await download.path();
		depths = exportedDepths(JSON.parse(fs.readFileSync(file, 'utf8')));
	}

	// What was parsed: each profile (a thread, for a Chrome trace) in turn
	// ('n' shows the next), with its name from the toolbar and, from the
	// sandwich view ('3'), its number of frames and its heaviest frames by
	// self time.
	await page.keyboard.press('3');
	const profiles = [];
	for (let i = 1; ; i++) {
		const p = await until(page, events, deadline,
			`profile ${i} in the sandwich view`, sandwich, [ROW_PX, i]);
		if (!Number.isInteger(p.frames) || p.frames < 1)
			return { error: `profile "${p.name}": ${p.frames} frames` };
		profiles.push({ name: p.name, frames: p.frames, top: p.top });
		if (i >= p.count)
			break;
		await page.keyboard.press('n');
	}
	return { info: {
		importer: events.importer,
		title: (await page.title()).replace(/ - speedscope$/, ''),
		ink,
		profiles: profiles.map((p, i) => depths ?
			Object.assign(p, { depth: depths[i].depth }) : p),
	} };
}

main().catch(e => fail(String(e && e.message || e).split('\n')[0]));
