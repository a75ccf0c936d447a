/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * --continuous --flight-recorder SECONDS[,MB] --trace-dir DIR: each job's
 * own flight recorder (export/flight_recorder.h), fed by what the daemon
 * records of it: its bursts (and on-demand captures), inside the budget,
 * so a window holds bursts, a few milliseconds each, not every op. It is
 * written as DIR/rfbpf-PID.sigusr1-N.json.gz on each SIGUSR1 to the
 * daemon, and as DIR/rfbpf-PID.end.json.gz when the job ends or the
 * daemon stops. MB bounds each job's recorder.
 */
#ifndef RFBPF_FLEET_JOB_RECORDER_H
#define RFBPF_FLEET_JOB_RECORDER_H

struct job;
/* 0, or -1 with errno (the job is traced without one). */
int job_recorder_start(struct job *j);
/* Writes the window as DIR/rfbpf-PID.<tag>.json.gz; 0, or -1 with errno. */
int job_recorder_dump(struct job *j, const char *tag, const char *why);
void job_recorder_free(struct job *j);

#endif
