/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where rfbpf keeps what must outlive one run: PID.state (the callback it
 * registered in a process, activation.h) and PID.lock (one rfbpf per
 * process). /run/rfbpf by default, RFBPF_STATE_DIR to put it elsewhere (a
 * test that must not touch the host's, a system without /run).
 *
 * Every mode prepares it once, after its privilege check, with the same
 * code whatever the path: a fresh machine has no /run/rfbpf, and the first
 * run must make it rather than warn. Preparing also drops what dead
 * processes left: a state file outlives a SIGKILLed rfbpf, and once its
 * process is gone (or its pid is another process's: the start time in
 * the file differs) it only misleads the next rfbpf on that pid.
 */
#ifndef RFBPF_STATE_DIR_H
#define RFBPF_STATE_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define STATE_DIR_DEFAULT "/run/rfbpf"
#define STATE_DIR_ENV "RFBPF_STATE_DIR"

/* RFBPF_STATE_DIR if set and not empty, else /run/rfbpf. */
const char *state_dir(void);
/* state_dir()/PID.ext into buf. */
void state_dir_path(pid_t pid, const char *ext, char *buf, size_t len);
/* Creates dir and its missing parents (parents 0755, dir itself 0700:
 * only root reads what rfbpf did to whose process). 0, or -errno with
 * one line in err naming the directory that could not be made. */
int state_dir_create(const char *dir, char *err, size_t len);
/* Is a PID.state file whose text is content stale, for a process that
 * started at start_now (0: no such process now)? Stale: the process is
 * gone, or the file names another start time (the pid was reused). A file
 * that cannot be parsed is stale only when the process is gone: it may be
 * being written. */
bool state_file_stale(const char *content, unsigned long long start_now);
/* Removes the stale PID.state files in dir, and the PID.lock files of
 * dead processes that no rfbpf holds, reading processes under proc_root
 * ("/proc"). Returns how many files were removed. */
int state_dir_clean(const char *dir, const char *proc_root);
/* Both, on state_dir(): 0, or -errno with one line in err. */
int state_dir_prepare(char *err, size_t len);

#endif
