"""A reader of Perfetto's TracePacket stream written from the wire format
alone (no .proto, no protobuf library): varints, length-delimited fields
and fixed64/fixed32, with the semantics Perfetto's importer gives them
for what rfbpf writes: trusted_packet_sequence_id, per-sequence interned
event names and categories, TracePacketDefaults (timestamp clock, track),
incremental sequence-local clocks from ClockSnapshot, TrackDescriptors
(thread and process), and SLICE_BEGIN/END pairs matched per track in time
order. It is independent of the protobuf-c encoder it checks."""
import collections
import struct


def fields(buf):
    """(field number, wire type, value) of a message's fields, in order:
    ints for varints and fixed, bytes for length-delimited."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        elif wt == 2:
            ln, i = varint(buf, i)
            v = bytes(buf[i:i + ln])
            i += ln
            if i > n:
                raise ValueError("length past the end")
        elif wt == 5:
            v = struct.unpack_from("<I", buf, i)[0]
            i += 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def msg(buf):
    """Fields of a message as {number: [values]}."""
    d = collections.defaultdict(list)
    for num, _, v in fields(buf):
        d[num].append(v)
    return d


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


class Trace:
    def __init__(self, path):
        data = open(path, "rb").read()
        self.packets = [v for num, wt, v in fields(data) if num == 1]
        self.threads = {}       # track uuid -> (pid, tid, name)
        self.processes = {}     # track uuid -> (pid, name)
        self.named = {}         # track uuid -> name (other tracks)
        self.events = []        # (ts, seq, track, type, name, cat, anns)
        self.instants = []
        self.counters = []      # (ts, track, value) of TYPE_COUNTER
        self.counts = {}
        seqs = {}
        for raw in self.packets:
            p = msg(raw)
            seq = p[10][0] if 10 in p else 0
            st = seqs.setdefault(seq, {"names": {}, "cats": {},
                                       "anns": {}, "clock": None,
                                       "track": 0, "inc": {}})
            flags = p[13][0] if 13 in p else 0
            if flags & 1:
                st.update(names={}, cats={}, anns={}, clock=None, track=0,
                          inc={})
            if 59 in p:                     # trace_packet_defaults
                dft = msg(p[59][0])
                if 58 in dft:
                    st["clock"] = dft[58][0]
                if 11 in dft:
                    st["track"] = msg(dft[11][0]).get(11, [0])[0]
            if 6 in p:                      # clock_snapshot
                for c in msg(p[6][0]).get(1, []):
                    c = msg(c)
                    if c.get(3, [0])[0]:
                        st["inc"][c[1][0]] = c[2][0]
            if 12 in p:                     # interned_data
                d = msg(p[12][0])
                for key, table in ((2, "names"), (1, "cats"), (3, "anns")):
                    for e in d.get(key, []):
                        e = msg(e)
                        st[table][e[1][0]] = e[2][0].decode()
            clock = p[58][0] if 58 in p else st["clock"]
            ts = p[8][0] if 8 in p else None
            if ts is not None and clock in st["inc"]:
                ts = st["inc"][clock] = st["inc"][clock] + ts
            if 60 in p:
                self.describe(msg(p[60][0]))
            if 11 in p:
                self.event(st, seq, ts, msg(p[11][0]))

    def describe(self, d):
        uuid = d[1][0]
        if 4 in d:
            t = msg(d[4][0])
            self.threads[uuid] = (t[1][0], t[2][0],
                                  t.get(5, [b""])[0].decode())
        elif 3 in d:
            pr = msg(d[3][0])
            self.processes[uuid] = (pr[1][0], pr.get(6, [b""])[0].decode())
        else:
            self.named[uuid] = d.get(2, [b""])[0].decode()

    def event(self, st, seq, ts, e):
        name = (st["names"][e[10][0]] if 10 in e else
                e[23][0].decode() if 23 in e else None)
        cat = st["cats"][e[3][0]] if 3 in e else None
        track = e[11][0] if 11 in e else st["track"]
        anns = {}
        for a in e.get(4, []):
            a = msg(a)
            key = st["anns"][a[1][0]] if 1 in a else a[10][0].decode()
            val = (signed(a[4][0]) if 4 in a else a[3][0] if 3 in a else
                   a[6][0].decode() if 6 in a else None)
            anns[key] = val
        typ = e[9][0]
        if typ == 3 and name == "rfbpf counts":
            self.counts = anns
        if typ == 4:
            self.counters.append((ts, track, signed(e.get(30, [0])[0])))
        self.events.append((ts, seq, track, typ, name, cat, anns,
                            e.get(47, []), e.get(48, [])))

    def slices(self):
        """Complete slices, as Perfetto's importer pairs them: per track,
        in time order, an END closes the innermost open BEGIN. Returns
        dicts with track, name, cat, ts, dur, args; and how many ENDs
        found nothing open."""
        by_track = collections.defaultdict(list)
        for i, ev in enumerate(self.events):
            if ev[3] in (1, 2):
                by_track[ev[2]].append((ev[0], i, ev))
        out, unmatched = [], 0
        for track, evs in by_track.items():
            evs.sort(key=lambda x: (x[0], x[1]))
            stack = []
            for ts, _, ev in evs:
                if ev[3] == 1:
                    stack.append(ev)
                elif not stack:
                    unmatched += 1
                else:
                    b = stack.pop()
                    out.append({"track": track, "name": b[4], "cat": b[5],
                                "ts": b[0], "dur": ts - b[0],
                                "args": {**b[6], **ev[6]},
                                "flows": list(b[7]) + list(ev[8])})
            unmatched += len(stack)
        return out, unmatched
