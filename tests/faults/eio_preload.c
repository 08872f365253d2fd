/* An I/O error on demand, for the fault campaign (tests/faults/campaign.py, fault "eio-save"):
 * preloaded into every process of a job (LD_PRELOAD), it makes write, pwrite, writev, fsync and
 * fdatasync fail with EIO on any file under a directory, while a trigger file exists.
 *
 *   PRIMUS_EIO_TRIGGER=FILE  while FILE exists, and names a directory on its first line, calls
 *                            on descriptors of files under that directory fail with EIO
 *
 * The trigger is looked at no more than every 5 ms, so that a process that writes a lot pays a
 * clock read per call, not a stat. Test code only: it is compiled by the campaign, never
 * installed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static __thread char prefix[4096]; /* per thread: no lock in a write path */
static __thread int active;
static __thread struct timespec checked;

static void look_at_trigger(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  long elapsed_ms =
      (now.tv_sec - checked.tv_sec) * 1000 + (now.tv_nsec - checked.tv_nsec) / 1000000;
  if (checked.tv_sec != 0 && elapsed_ms < 5) return;
  checked = now;
  const char* trigger = getenv("PRIMUS_EIO_TRIGGER");
  active = 0;
  if (trigger == NULL) return;
  FILE* f = fopen(trigger, "re");
  if (f == NULL) return;
  if (fgets(prefix, sizeof prefix, f) != NULL) {
    prefix[strcspn(prefix, "\n")] = '\0';
    active = prefix[0] != '\0';
  }
  fclose(f);
}

static int fails(int fd) {
  look_at_trigger();
  if (!active) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  size_t length = strlen(prefix);
  return strncmp(path, prefix, length) == 0 && (path[length] == '/' || path[length] == '\0');
}

#define REAL(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void* buf, size_t count) {
  if (fails(fd)) return errno = EIO, -1;
  return REAL(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  if (fails(fd)) return errno = EIO, -1;
  return REAL(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  if (fails(fd)) return errno = EIO, -1;
  return REAL(pwrite64)(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec* iov, int iovcnt) {
  if (fails(fd)) return errno = EIO, -1;
  return REAL(writev)(fd, iov, iovcnt);
}

int fsync(int fd) {
  if (fails(fd)) return errno = EIO, -1;
  return REAL(fsync)(fd);
}

int fdatasync(int fd) {
  if (fails(fd)) return errno = EIO, -1;
  return REAL(fdatasync)(fd);
}
