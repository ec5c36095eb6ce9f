/*
 * faultshim: an LD_PRELOAD library that models a disk and a kernel that lose
 * data the way Linux can ("fsyncgate"), for tests/cli/cli_fault_soak.rs.
 * The test compiles it at run time:
 *
 *     cc -shared -fPIC -O1 -o libfaultshim.so faultshim.c -ldl -lpthread
 *
 * and runs every `runlog` process of a trial with LD_PRELOAD pointing at it.
 *
 * Environment (read once per process):
 *
 *   FAULTSHIM_ROOT   an absolute, canonical directory. Only regular files whose
 *                    path (readlink of /proc/self/fd/N) is under it are
 *                    watched; everything else passes straight through. Unset
 *                    or empty: the shim does nothing at all.
 *   FAULTSHIM_STATE  a directory shared by every process of a trial (not under
 *                    the root). Unset or empty: nothing is tracked and no
 *                    fault is injected, only FAULTSHIM_SYNC_DELAY_US and
 *                    FAULTSHIM_JITTER_US apply (a slow disk, at no other
 *                    cost). Holds, per inode `i-<dev>-<ino>`:
 *                      .shadow  the inode's durable bytes: what successful
 *                               fsyncs made durable (the power-loss image);
 *                      .dirty   one byte per 4096-byte page, 1 if an
 *                               intercepted write or truncate touched the
 *                               page since the inode's last successful sync;
 *                      .lost    one byte per page, 1 if a failed sync marked
 *                               the page clean (eio_clean) and no write has
 *                               touched it since;
 *                    and `lock` (flock-ed around every update of the above),
 *                    `fired` (one line per fault injected), `held` (one line
 *                    per hold point reached) and `bugs` (one line per thing
 *                    the shim saw that it does not model; a test fails when
 *                    this file is not empty).
 *   FAULTSHIM_PLAN   this process's single fault, empty for none:
 *                      eio_drop:N    the Nth fsync/fdatasync of a file named
 *                                    seg-* fails with EIO, and the file's
 *                                    dirty pages are dropped for everyone: its
 *                                    bytes there become the shadow's (zeros
 *                                    past the shadow's end; the size is kept),
 *                                    so every process reads the old bytes.
 *                      eio_clean:N   that sync fails with EIO; the bytes stay
 *                                    readable, but the dirty pages are marked
 *                                    clean: no later successful sync (by any
 *                                    process) makes them durable unless a
 *                                    write touches them again.
 *                      eio:N         that sync fails with EIO, nothing lost
 *                                    (the pages stay dirty).
 *                      enospc_write:N  the Nth pwrite/write to a seg-* file
 *                                    fails with ENOSPC, nothing written.
 *                      short_write:N   that write writes the first half of
 *                                    its bytes and returns that count.
 *                      kill_before_sync:N / kill_after_sync:N  SIGKILL to
 *                                    itself just before the Nth seg-* sync
 *                                    (nothing of it done), or just after it
 *                                    succeeded and its shadow was taken.
 *                    Counts are per process, 1-based.
 *   FAULTSHIM_SYNC_DELAY_US=D  sleep D microseconds before every watched
 *                    fsync/fdatasync (outside the shim's lock): a slow disk,
 *                    for measuring what group commit buys.
 *   FAULTSHIM_JITTER_US=J      sleep a random 0..J microseconds before each
 *                    exclusive flock of a file named SYNC under the root, to
 *                    shuffle which writer syncs next.
 *   FAULTSHIM_HOLD=before_flock:NAME:PATH  the first time this process takes
 *                    an exclusive flock of the file NAME under the root
 *                    (LOCK, the writer lock; SYNC, the sync lock, counted
 *                    only once the process has written to a segment: its
 *                    sync step after its append, not its open's own check of
 *                    the sync state under the sync lock, FORMAT.md §5.8), append
 *                    "before_flock NAME <pid>" to STATE/held, then wait until
 *                    PATH exists (at most 120 s, then abort).
 *                    `before_sync_lock:PATH` is `before_flock:SYNC:PATH`.
 *
 * Why the shadow is a sound image of what is durable (neither more nor less
 * than a successful fsync guarantees):
 *   - every intercepted write (pwrite, pwrite64, write) and truncate of a
 *     watched file runs with the state lock held: it marks the pages it
 *     touched dirty in the same critical section as the real system call;
 *   - a successful sync holds the same lock from before the real fsync until
 *     its copy into the shadow is done, so no write can land between the
 *     fsync's return and the copy: the bytes copied are exactly those the
 *     fsync covered (a write that would have raced the fsync is ordered
 *     wholly before it or wholly after it, one of the orders the kernel
 *     allows);
 *   - only dirty pages are copied; a page marked lost by eio_clean is not
 *     dirty, so a later sync leaves its old durable bytes in the shadow,
 *     which is what a kernel that marked the page clean leaves on the disk;
 *   - the shadow's length becomes the file's length at each successful sync
 *     (fdatasync persists a size that changed);
 *   - a new file (created by this open, O_CREAT|O_EXCL or O_CREAT where the
 *     name did not exist) starts with no shadow: empty on the disk until its
 *     first sync, whatever an inode of the same number held before;
 *   - as a check on the shim itself, each successful sync compares every
 *     page it does not copy with the shadow: a difference on a page neither
 *     dirty nor lost means the file was changed by a call the shim does not
 *     see (say mmap, or writev), and is written to STATE/bugs. The calls the
 *     shim does not model (writev, pwritev*, fallocate*, copy_file_range,
 *     sendfile*) are logged there too when they touch a watched file (a
 *     shared writable mmap is not intercepted: the page check would see
 *     what it wrote).
 * runlog writes its files with pwrite64 only, resizes them with ftruncate,
 * syncs them with fdatasync and fsync, and creates them with openat
 * (O_CREAT|O_EXCL for data files); strace of init, unit and compact shows no
 * writev, pwritev, fallocate, copy_file_range or sendfile on them.
 *
 * Directory operations (create, rename, unlink) are taken as durable at once;
 * files that are never synced have no shadow, which the test reads as empty.
 *
 * By hand, say a benchmark on a disk whose fdatasync takes 2 ms:
 *
 *     cc -shared -fPIC -O1 -o /tmp/libfaultshim.so tests/faultshim/faultshim.c -ldl -lpthread
 *     LD_PRELOAD=/tmp/libfaultshim.so FAULTSHIM_ROOT="$(realpath .runlog)" \
 *         FAULTSHIM_SYNC_DELAY_US=2000 runlog unit r a done
 *
 * (with FAULTSHIM_STATE set too, every sync also reads the file and its
 * shadow, and every write takes the state lock: fine for a soak, not for a
 * measurement).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096

/* The real functions, from the next object in the lookup order (libc). The
 * shim calls only these for its own I/O, never its own wrappers. */
static struct {
    ssize_t (*pwrite64)(int, const void *, size_t, off64_t);
    ssize_t (*pwrite)(int, const void *, size_t, off_t);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
    ssize_t (*pwritev64)(int, const struct iovec *, int, off64_t);
    ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
    ssize_t (*pwritev64v2)(int, const struct iovec *, int, off64_t, int);
    int (*fsync)(int);
    int (*fdatasync)(int);
    int (*ftruncate)(int, off_t);
    int (*ftruncate64)(int, off64_t);
    int (*open)(const char *, int, ...);
    int (*open64)(const char *, int, ...);
    int (*openat)(int, const char *, int, ...);
    int (*openat64)(int, const char *, int, ...);
    int (*flock)(int, int);
    int (*fallocate)(int, int, off_t, off_t);
    int (*fallocate64)(int, int, off64_t, off64_t);
    ssize_t (*copy_file_range)(int, off64_t *, int, off64_t *, size_t, unsigned);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
    ssize_t (*sendfile64)(int, int, off64_t *, size_t);
} real;

enum plan_kind {
    PLAN_NONE,
    PLAN_EIO_DROP,
    PLAN_EIO_CLEAN,
    PLAN_EIO,
    PLAN_ENOSPC_WRITE,
    PLAN_SHORT_WRITE,
    PLAN_KILL_BEFORE_SYNC,
    PLAN_KILL_AFTER_SYNC,
};
static const char *const plan_names[] = {
    "", "eio_drop", "eio_clean", "eio", "enospc_write", "short_write",
    "kill_before_sync", "kill_after_sync",
};

static char root[PATH_MAX];
static size_t root_len; /* 0: the shim is inert */
static char state[PATH_MAX];
static enum plan_kind plan = PLAN_NONE;
static long plan_n;
static long sync_delay_us, jitter_us;
static char hold_name[64];       /* the lock file's name */
static char hold_path[PATH_MAX]; /* empty: no hold */
static int held_once;
static long seg_syncs, seg_writes; /* this process's counts, atomically */
static unsigned long long rng_state;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int lock_fd = -1;

#define RESOLVE(name) real.name = dlsym(RTLD_NEXT, #name)

static void append_line(const char *file, const char *line);

static void init(void) {
    RESOLVE(pwrite64); RESOLVE(pwrite); RESOLVE(write); RESOLVE(writev);
    RESOLVE(pwritev); RESOLVE(pwritev64); RESOLVE(pwritev2); RESOLVE(pwritev64v2);
    RESOLVE(fsync); RESOLVE(fdatasync); RESOLVE(ftruncate); RESOLVE(ftruncate64);
    RESOLVE(open); RESOLVE(open64); RESOLVE(openat); RESOLVE(openat64);
    RESOLVE(flock); RESOLVE(fallocate); RESOLVE(fallocate64);
    RESOLVE(copy_file_range); RESOLVE(sendfile); RESOLVE(sendfile64);

    const char *r = getenv("FAULTSHIM_ROOT");
    const char *s = getenv("FAULTSHIM_STATE");
    if (!r || !*r) return;
    snprintf(root, sizeof root, "%s", r);
    snprintf(state, sizeof state, "%s", s ? s : "");
    root_len = strlen(root);
    while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = 0;

    const char *p = getenv("FAULTSHIM_PLAN");
    if (p && *p) {
        const char *colon = strchr(p, ':');
        size_t klen = colon ? (size_t)(colon - p) : strlen(p);
        for (int k = 1; k < (int)(sizeof plan_names / sizeof *plan_names); k++)
            if (strlen(plan_names[k]) == klen && !strncmp(p, plan_names[k], klen))
                plan = (enum plan_kind)k;
        plan_n = colon ? strtol(colon + 1, NULL, 10) : 0;
        if (plan == PLAN_NONE || plan_n < 1 || !state[0]) {
            char line[512];
            snprintf(line, sizeof line, "faultshim: pid %d: FAULTSHIM_PLAN=%s is not KIND:N, or FAULTSHIM_STATE is unset\n",
                     getpid(), p);
            if (state[0]) append_line("bugs", line);
            (void)real.write(2, line, strlen(line));
            abort();
        }
    }
    const char *d = getenv("FAULTSHIM_SYNC_DELAY_US");
    if (d) sync_delay_us = strtol(d, NULL, 10);
    const char *j = getenv("FAULTSHIM_JITTER_US");
    if (j) jitter_us = strtol(j, NULL, 10);
    const char *h = getenv("FAULTSHIM_HOLD");
    if (h && !strncmp(h, "before_sync_lock:", 17)) {
        snprintf(hold_name, sizeof hold_name, "SYNC");
        snprintf(hold_path, sizeof hold_path, "%s", h + 17);
    } else if (h && !strncmp(h, "before_flock:", 13) && strchr(h + 13, ':')) {
        const char *colon = strchr(h + 13, ':');
        snprintf(hold_name, sizeof hold_name, "%.*s", (int)(colon - (h + 13)), h + 13);
        snprintf(hold_path, sizeof hold_path, "%s", colon + 1);
    } else if (h && *h) {
        char line[PATH_MAX + 128];
        snprintf(line, sizeof line, "faultshim: pid %d: FAULTSHIM_HOLD=%s is not before_flock:NAME:PATH\n", getpid(), h);
        if (state[0]) append_line("bugs", line);
        (void)real.write(2, line, strlen(line));
        abort();
    }
    rng_state = ((unsigned long long)getpid() << 32) ^ (unsigned long long)time(NULL) ^ 0x9E3779B97F4A7C15ull;
}

static void ensure_init(void) { pthread_once(&once, init); }

/* Appends one line to STATE/<file> with one write on an O_APPEND descriptor
 * (lines from many processes do not interleave). */
static void append_line(const char *file, const char *line) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", state, file);
    int fd = real.open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    (void)real.write(fd, line, strlen(line));
    close(fd);
}

/* A thing the shim cannot model: recorded for the test, and said on stderr. */
static void bug(const char *fmt, ...) {
    char line[PATH_MAX + 512];
    int n = snprintf(line, sizeof line, "pid %d: ", getpid());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    strncat(line, "\n", sizeof line - strlen(line) - 1);
    append_line("bugs", line);
    (void)real.write(2, "faultshim: ", 11);
    (void)real.write(2, line, strlen(line));
}

/* The shim cannot go on (its state is unreadable): say so and abort, which
 * the test sees as a process killed by SIGABRT. */
static void die(const char *what) {
    bug("fatal: %s: %s", what, strerror(errno));
    abort();
}

/* The state lock: a mutex for the threads of this process (an flock is held
 * per open file description, which they share), then the flock for the
 * processes. */
static void state_lock(void) {
    pthread_mutex_lock(&mu);
    if (lock_fd < 0) {
        char path[PATH_MAX + 8];
        snprintf(path, sizeof path, "%s/lock", state);
        lock_fd = real.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0) die("open the state lock");
    }
    while (real.flock(lock_fd, LOCK_EX) != 0)
        if (errno != EINTR) die("flock the state lock");
}

static void state_unlock(void) {
    real.flock(lock_fd, LOCK_UN);
    pthread_mutex_unlock(&mu);
}

/* A watched file: its stat, its path and whether it is a segment. */
struct target {
    struct stat st;
    char path[PATH_MAX];
    const char *base;
    int seg;
};

static int watched(int fd, struct target *t) {
    ensure_init();
    if (!root_len || fd < 0) return 0;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, t->path, sizeof t->path - 1);
    if (n <= 0) return 0;
    t->path[n] = 0;
    if (strncmp(t->path, root, root_len) != 0 || t->path[root_len] != '/') return 0;
    if (fstat(fd, &t->st) != 0 || !S_ISREG(t->st.st_mode)) return 0;
    const char *slash = strrchr(t->path, '/');
    t->base = slash ? slash + 1 : t->path;
    /* A segment, or its copy being made (`seg-….log.tmp-…`, FORMAT.md §5.5
     * step 4); not a quarantined tail (`.broken-`). */
    t->seg = strncmp(t->base, "seg-", 4) == 0 && !strstr(t->base, ".broken");
    return 1;
}

/* Whether writes and syncs are tracked (FAULTSHIM_STATE set). */
static int tracking(void) { return state[0] != 0; }

static void inode_path(char *out, size_t cap, const struct stat *st, const char *ext) {
    snprintf(out, cap, "%s/i-%lx-%lx.%s", state, (unsigned long)st->st_dev,
             (unsigned long)st->st_ino, ext);
}

/* Sets bytes [p0, p1) of the inode's page map `ext` to v. With `create` 0 a
 * map that does not exist is left absent (nothing to clear in it). */
static void map_set(const struct stat *st, const char *ext, size_t p0, size_t p1, char v, int create) {
    if (p1 <= p0) return;
    char path[PATH_MAX + 64];
    inode_path(path, sizeof path, st, ext);
    int fd = real.open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
    if (fd < 0) {
        if (errno == ENOENT && !create) return;
        die("open a page map");
    }
    size_t n = p1 - p0;
    char *buf = malloc(n);
    if (!buf) die("malloc");
    memset(buf, v, n);
    if (real.pwrite64(fd, buf, n, (off64_t)p0) != (ssize_t)n) die("write a page map");
    free(buf);
    close(fd);
}

/* The first `n` bytes of a file of the state (zeros past its end), or of the
 * file open as `fd` when `path` is NULL; *len gets the file's length. */
static unsigned char *load(const char *path, int fd, size_t n, size_t *len) {
    unsigned char *buf = calloc(n ? n : 1, 1);
    if (!buf) die("calloc");
    int own = 0;
    if (path) {
        fd = real.open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT) die("open a state file");
            if (len) *len = 0;
            return buf;
        }
        own = 1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) die("fstat");
    if (len) *len = (size_t)st.st_size;
    size_t want = (size_t)st.st_size < n ? (size_t)st.st_size : n, got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("read");
        got += (size_t)r;
    }
    if (own) close(fd);
    return buf;
}

static void remove_state(const struct stat *st) {
    static const char *const exts[] = {"shadow", "dirty", "lost"};
    for (int i = 0; i < 3; i++) {
        char path[PATH_MAX + 64];
        inode_path(path, sizeof path, st, exts[i]);
        if (unlink(path) != 0 && errno != ENOENT) die("unlink a state file");
    }
}

/* Under the state lock: a write to [off, off+len) happened. */
static void wrote(const struct target *t, off64_t off, size_t len) {
    if (len == 0) return;
    size_t p0 = (size_t)(off / PAGE), p1 = (size_t)((off + (off64_t)len - 1) / PAGE) + 1;
    map_set(&t->st, "dirty", p0, p1, 1, 1);
    map_set(&t->st, "lost", p0, p1, 0, 0);
}

static size_t pages(size_t bytes) { return (bytes + PAGE - 1) / PAGE; }

/* Reopens a descriptor's file (works for an unlinked one too). */
static int reopen(int fd, int flags) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int r = real.open(link, flags | O_CLOEXEC);
    if (r < 0) die("reopen through /proc/self/fd");
    return r;
}

/* Under the state lock, right after a successful real sync of `fd`: copies
 * its dirty pages into the shadow, sets the shadow's length to the file's,
 * and checks every other page against the shadow. */
static void synced(const struct target *t, int fd) {
    int rfd = reopen(fd, O_RDONLY);
    struct stat now;
    if (fstat(rfd, &now) != 0) die("fstat");
    size_t fsize = (size_t)now.st_size, np = pages(fsize), ssize;
    char spath[PATH_MAX + 64], dpath[PATH_MAX + 64], lpath[PATH_MAX + 64];
    inode_path(spath, sizeof spath, &t->st, "shadow");
    inode_path(dpath, sizeof dpath, &t->st, "dirty");
    inode_path(lpath, sizeof lpath, &t->st, "lost");
    unsigned char *file = load(NULL, rfd, fsize, NULL);
    unsigned char *shadow = load(spath, -1, fsize, &ssize);
    unsigned char *dirty = load(dpath, -1, np, NULL);
    unsigned char *lost = load(lpath, -1, np, NULL);
    close(rfd);
    int sfd = real.open(spath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (sfd < 0) die("open a shadow");
    for (size_t p = 0; p < np; p++) {
        size_t off = p * PAGE, len = fsize - off < PAGE ? fsize - off : PAGE;
        if (dirty[p]) {
            if (real.pwrite64(sfd, file + off, len, (off64_t)off) != (ssize_t)len) die("write a shadow");
        } else if (!lost[p] && memcmp(file + off, shadow + off, len) != 0) {
            /* `shadow` reads as zeros past its end, as the disk does after a
             * size raised by a sync. */
            bug("page %zu of %s (ino %lu) differs from its shadow, and no write the shim saw touched it",
                p, t->path, (unsigned long)t->st.st_ino);
        }
    }
    if (real.ftruncate64(sfd, (off64_t)fsize) != 0) die("size a shadow");
    close(sfd);
    if (unlink(dpath) != 0 && errno != ENOENT) die("clear a dirty map");
    free(file); free(shadow); free(dirty); free(lost);
}

/* Under the state lock: eio_drop. The file's dirty pages are dropped from the
 * page cache: its bytes there become the shadow's, for every process. */
static void drop_dirty(const struct target *t, int fd) {
    int wfd = reopen(fd, O_WRONLY);
    struct stat now;
    if (fstat(wfd, &now) != 0) die("fstat");
    size_t fsize = (size_t)now.st_size, np = pages(fsize);
    char spath[PATH_MAX + 64], dpath[PATH_MAX + 64];
    inode_path(spath, sizeof spath, &t->st, "shadow");
    inode_path(dpath, sizeof dpath, &t->st, "dirty");
    unsigned char *shadow = load(spath, -1, np * PAGE, NULL);
    unsigned char *dirty = load(dpath, -1, np, NULL);
    for (size_t p = 0; p < np; p++) {
        if (!dirty[p]) continue;
        size_t off = p * PAGE, len = fsize - off < PAGE ? fsize - off : PAGE;
        if (real.pwrite64(wfd, shadow + off, len, (off64_t)off) != (ssize_t)len) die("drop a page");
    }
    close(wfd);
    if (unlink(dpath) != 0 && errno != ENOENT) die("clear a dirty map");
    free(shadow); free(dirty);
}

/* Under the state lock: eio_clean. The dirty pages become clean and lost. */
static void mark_clean(const struct target *t, int fd) {
    struct stat now;
    if (fstat(fd, &now) != 0) die("fstat");
    size_t np = pages((size_t)now.st_size);
    char dpath[PATH_MAX + 64];
    inode_path(dpath, sizeof dpath, &t->st, "dirty");
    unsigned char *dirty = load(dpath, -1, np, NULL);
    for (size_t p = 0; p < np; p++)
        if (dirty[p]) map_set(&t->st, "lost", p, p + 1, 1, 1);
    if (unlink(dpath) != 0 && errno != ENOENT) die("clear a dirty map");
    free(dirty);
}

static void fired(const struct target *t, long n) {
    char line[PATH_MAX + 128];
    snprintf(line, sizeof line, "%s:%ld pid=%d file=%s\n", plan_names[plan], n, getpid(), t->base);
    append_line("fired", line);
}

static int do_sync(int fd, int data) {
    struct target t;
    if (!watched(fd, &t)) return data ? real.fdatasync(fd) : real.fsync(fd);
    if (sync_delay_us > 0) usleep((useconds_t)sync_delay_us);
    if (!tracking()) return data ? real.fdatasync(fd) : real.fsync(fd);
    long n = t.seg ? __atomic_add_fetch(&seg_syncs, 1, __ATOMIC_SEQ_CST) : 0;
    int fire = t.seg && n == plan_n;
    if (fire && plan == PLAN_KILL_BEFORE_SYNC) {
        fired(&t, n);
        raise(SIGKILL);
    }
    if (fire && (plan == PLAN_EIO_DROP || plan == PLAN_EIO_CLEAN || plan == PLAN_EIO)) {
        state_lock();
        if (plan == PLAN_EIO_DROP) drop_dirty(&t, fd);
        if (plan == PLAN_EIO_CLEAN) mark_clean(&t, fd);
        fired(&t, n);
        state_unlock();
        errno = EIO;
        return -1;
    }
    state_lock();
    int r = data ? real.fdatasync(fd) : real.fsync(fd);
    int e = errno;
    if (r == 0) synced(&t, fd);
    state_unlock();
    if (fire && plan == PLAN_KILL_AFTER_SYNC && r == 0) {
        fired(&t, n);
        raise(SIGKILL);
    }
    errno = e;
    return r;
}

int fsync(int fd) { return do_sync(fd, 0); }
int fdatasync(int fd) { return do_sync(fd, 1); }

/* A positioned write (`pos` >= 0) or a write at the file offset (`pos` < 0). */
static ssize_t do_write(int fd, const void *buf, size_t len, off64_t pos) {
    struct target t;
    if (!watched(fd, &t) || !tracking())
        return pos >= 0 ? real.pwrite64(fd, buf, len, pos) : real.write(fd, buf, len);
    if (t.seg) {
        long n = __atomic_add_fetch(&seg_writes, 1, __ATOMIC_SEQ_CST);
        if (n == plan_n && plan == PLAN_ENOSPC_WRITE) {
            fired(&t, n);
            errno = ENOSPC;
            return -1;
        }
        if (n == plan_n && plan == PLAN_SHORT_WRITE && len >= 2) {
            fired(&t, n);
            len /= 2;
        }
    }
    state_lock();
    off64_t at = pos;
    if (pos < 0) {
        int fl = fcntl(fd, F_GETFL);
        at = (fl >= 0 && (fl & O_APPEND)) ? (off64_t)lseek(fd, 0, SEEK_END) : (off64_t)lseek(fd, 0, SEEK_CUR);
    }
    ssize_t r = pos >= 0 ? real.pwrite64(fd, buf, len, pos) : real.write(fd, buf, len);
    int e = errno;
    if (r > 0 && at >= 0) wrote(&t, at, (size_t)r);
    if (r > 0 && at < 0) bug("a write to %s at an unknown offset", t.path);
    state_unlock();
    errno = e;
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t pos) { return do_write(fd, buf, len, pos); }
ssize_t pwrite(int fd, const void *buf, size_t len, off_t pos) { return do_write(fd, buf, len, pos); }
ssize_t write(int fd, const void *buf, size_t len) { return do_write(fd, buf, len, -1); }

static int do_truncate(int fd, off64_t len) {
    struct target t;
    if (!watched(fd, &t) || !tracking()) return real.ftruncate64(fd, len);
    state_lock();
    struct stat was;
    if (fstat(fd, &was) != 0) die("fstat");
    int r = real.ftruncate64(fd, len);
    int e = errno;
    if (r == 0) {
        off64_t old = was.st_size, lo = old < len ? old : len, hi = old < len ? len : old;
        if (hi > lo) wrote(&t, lo, (size_t)(hi - lo));
    }
    state_unlock();
    errno = e;
    return r;
}

int ftruncate(int fd, off_t len) { return do_truncate(fd, len); }
int ftruncate64(int fd, off64_t len) { return do_truncate(fd, len); }

/* Opens through `call`; a watched file this open created starts with no
 * shadow (a new inode may reuse a deleted one's number), and one it truncated
 * (O_TRUNC) has its old pages dirty. */
enum open_call { OPEN, OPEN64, OPENAT, OPENAT64 };

static int do_open(enum open_call which, int dirfd, const char *path, int flags, mode_t mode) {
    ensure_init();
    struct stat before;
    int existed = 0;
    if (root_len && (flags & (O_CREAT | O_TRUNC)))
        existed = fstatat(dirfd, path, &before, AT_SYMLINK_NOFOLLOW) == 0;
    int fd;
    switch (which) {
    case OPEN: fd = real.open(path, flags, mode); break;
    case OPEN64: fd = real.open64(path, flags, mode); break;
    case OPENAT: fd = real.openat(dirfd, path, flags, mode); break;
    default: fd = real.openat64(dirfd, path, flags, mode); break;
    }
    if (fd < 0 || !root_len) return fd;
    int e = errno;
    struct target t;
    if ((flags & (O_CREAT | O_TRUNC)) && tracking() && watched(fd, &t)) {
        state_lock();
        if ((flags & O_CREAT) && (!existed || (flags & O_EXCL)))
            remove_state(&t.st);
        else if ((flags & O_TRUNC) && existed && before.st_size > 0)
            wrote(&t, 0, (size_t)before.st_size);
        state_unlock();
    }
    errno = e;
    return fd;
}

static mode_t va_mode(int flags, va_list ap) {
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t m = va_mode(flags, ap); va_end(ap);
    return do_open(OPEN, AT_FDCWD, path, flags, m);
}
int open64(const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t m = va_mode(flags, ap); va_end(ap);
    return do_open(OPEN64, AT_FDCWD, path, flags, m);
}
int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t m = va_mode(flags, ap); va_end(ap);
    return do_open(OPENAT, dirfd, path, flags, m);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap; va_start(ap, flags); mode_t m = va_mode(flags, ap); va_end(ap);
    return do_open(OPENAT64, dirfd, path, flags, m);
}

/* flock: the jitter, before an exclusive lock of SYNC under the root, and the
 * hold point, before the first exclusive lock of its file. */
int flock(int fd, int op) {
    struct target t;
    if ((op & LOCK_EX) && watched(fd, &t)) {
        if (jitter_us > 0 && !strcmp(t.base, "SYNC")) {
            pthread_mutex_lock(&mu);
            rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
            unsigned long long r = rng_state >> 33;
            pthread_mutex_unlock(&mu);
            usleep((useconds_t)(r % (unsigned long long)(jitter_us + 1)));
        }
        int after_append = strcmp(hold_name, "SYNC") != 0 ||
                           __atomic_load_n(&seg_writes, __ATOMIC_SEQ_CST) > 0;
        if (hold_path[0] && tracking() && !strcmp(t.base, hold_name) && after_append &&
            !__atomic_exchange_n(&held_once, 1, __ATOMIC_SEQ_CST)) {
            char line[128];
            snprintf(line, sizeof line, "before_flock %s %d\n", hold_name, getpid());
            append_line("held", line);
            struct stat st;
            for (int i = 0; stat(hold_path, &st) != 0; i++) {
                if (i > 120000) {
                    bug("held before the flock of %s for 120 s: %s never appeared", hold_name, hold_path);
                    abort();
                }
                usleep(1000);
            }
        }
    }
    return real.flock(fd, op);
}

/* The calls the shim does not model: passed through, and logged as bugs
 * when they touch a watched file (the shadow would miss what they wrote). */
#define UNMODELLED(fd, what)                                                   \
    do {                                                                       \
        struct target t_;                                                      \
        if (tracking() && watched((fd), &t_)) bug("%s on %s: not modelled by the shim", (what), t_.path); \
    } while (0)

ssize_t writev(int fd, const struct iovec *iov, int n) {
    UNMODELLED(fd, "writev");
    return real.writev(fd, iov, n);
}
ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t o) {
    UNMODELLED(fd, "pwritev");
    return real.pwritev(fd, iov, n, o);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int n, off64_t o) {
    UNMODELLED(fd, "pwritev64");
    return real.pwritev64(fd, iov, n, o);
}
ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t o, int f) {
    UNMODELLED(fd, "pwritev2");
    return real.pwritev2(fd, iov, n, o, f);
}
ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off64_t o, int f) {
    UNMODELLED(fd, "pwritev64v2");
    return real.pwritev64v2(fd, iov, n, o, f);
}
int fallocate(int fd, int mode, off_t o, off_t l) {
    UNMODELLED(fd, "fallocate");
    return real.fallocate(fd, mode, o, l);
}
int fallocate64(int fd, int mode, off64_t o, off64_t l) {
    UNMODELLED(fd, "fallocate64");
    return real.fallocate64(fd, mode, o, l);
}
ssize_t copy_file_range(int in, off64_t *oi, int out, off64_t *oo, size_t l, unsigned f) {
    UNMODELLED(out, "copy_file_range");
    return real.copy_file_range(in, oi, out, oo, l, f);
}
ssize_t sendfile(int out, int in, off_t *o, size_t l) {
    UNMODELLED(out, "sendfile");
    return real.sendfile(out, in, o, l);
}
ssize_t sendfile64(int out, int in, off64_t *o, size_t l) {
    UNMODELLED(out, "sendfile64");
    return real.sendfile64(out, in, o, l);
}
