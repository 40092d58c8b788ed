/**
 * Where `npm test` keeps what its tests write to the temp dir: bin/test.mjs makes one folder for
 * the run in {@link throwawayDir} and sets TMPDIR to it for itself (the suite's PostgreSQL, Redis
 * and Redis Cluster: test/harness/global.ts) and every test process (their own PostgreSQL
 * servers, `npm start` data dirs, fixtures), and removes it at the end.
 */
import { statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';

/** /dev/shm is used when it is a tmpfs with at least this much free. */
const SHM_FREE_BYTES = 2 * 1024 ** 3;
/** statfs's f_type of a tmpfs (linux/magic.h TMPFS_MAGIC). */
const TMPFS_MAGIC = 0x01021994;

/**
 * /dev/shm when it is a tmpfs with room, else the system's temp dir. Every test file's database
 * is a copy of the template (about 700 files: each table, index and their forks), and on a disk
 * filesystem the kernel's work to create and delete those files was most of a copy's cost: 0.6 s
 * of CPU per database on ext4 against 0.06 s on tmpfs (bench/RESULTS.md, "Session 6"), over 140
 * databases a run; each PostgreSQL a test starts (initdb) and each `npm start` data dir the same.
 * What a test writes there is thrown away at the end of the run either way (the servers run
 * without fsync), so memory loses nothing a disk would have kept.
 */
export function throwawayDir(): string {
  try {
    const fs = statfsSync('/dev/shm');
    if (fs.type === TMPFS_MAGIC && fs.bavail * fs.bsize >= SHM_FREE_BYTES) return '/dev/shm';
  } catch {
    // no /dev/shm (not Linux, a container without it): the temp dir
  }
  return tmpdir();
}
