/* tptrain-run: start N local worker processes with torchrun's environment
 * contract, prefix their output by rank, and stop them all on the first
 * failure (issue 15, item 3).
 *
 *   tptrain-run [options] [--] PROGRAM [ARGS...]
 *
 * Each worker gets the variables torchrun (PyTorch 1.13's LocalElasticAgent)
 * sets, on top of the launcher's environment: MASTER_ADDR, MASTER_PORT,
 * WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE,
 * ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, TORCHELASTIC_RUN_ID,
 * TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,
 * TORCHELASTIC_USE_AGENT_STORE (False: no store is hosted by this launcher,
 * rank 0 hosts it), NCCL_ASYNC_ERROR_HANDLING (1 unless set),
 * OMP_NUM_THREADS (1 when more than one worker and it is not set) and
 * TPTRAIN_STOP_ON_SIGNALS (1 unless set: a forwarded SIGTERM stops the
 * workers' training gracefully, saving a checkpoint).
 *
 * One thread: the workers' stdout and stderr come through pipes watched with
 * poll(); signals (SIGCHLD, and SIGINT/SIGTERM/SIGHUP/SIGQUIT to the
 * launcher) come through a self-pipe. Workers are signalled by pid (not by
 * process group: a pipeline's other commands share the launcher's group), and
 * on Linux each worker asks for SIGKILL when the launcher dies
 * (PR_SET_PDEATHSIG), so that not even a SIGKILLed launcher leaves orphans.
 *
 * C11 + POSIX, libc only. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

extern char **environ;

#define PROG "tptrain-run"
#define EXIT_USAGE 2
#define EXIT_INTERNAL 1
#define EXIT_NOT_EXECUTABLE 126
#define EXIT_NOT_FOUND 127
#define MAX_NPROC 4096
#define MAX_NNODES 1000000
/* A line longer than this without a newline is written out as a line of its own. */
#define MAX_LINE (1u << 20)
#define READ_CHUNK 65536

/* ------------------------------------------------------------------ options */

typedef struct {
  int nproc;
  int nnodes;
  int node_rank;
  const char *master_addr;
  int master_port;
  const char *run_id;
  double grace_seconds;
  int no_prefix;
  char **program_argv; /* PROGRAM ARGS..., NULL-terminated (points into argv) */
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: " PROG " [options] [--] PROGRAM [ARGS...]\n"
          "\n"
          "Starts N local worker processes of PROGRAM with torchrun's environment\n"
          "(MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
          "GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME,\n"
          "TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS,\n"
          "TORCHELASTIC_USE_AGENT_STORE, NCCL_ASYNC_ERROR_HANDLING, OMP_NUM_THREADS),\n"
          "prefixes each line they print with \"[rank R] \", and on the first worker\n"
          "that fails stops the others and exits with that worker's status (128 + N\n"
          "for a worker killed by signal N). An argument equal to or containing\n"
          "${local_rank} gets the worker's local rank, as under torchrun.\n"
          "\n"
          "options:\n"
          "  -n, --nproc-per-node N   workers on this node (default 1; 'cpu': one per\n"
          "                           online CPU)\n"
          "      --nnodes M           nodes in the job (default 1)\n"
          "      --node-rank R        this node's rank, 0 .. M-1 (default 0)\n"
          "      --master-addr A      address of the node with rank 0 (default 127.0.0.1)\n"
          "      --master-port P      its port, 1 .. 65535 (default 29500)\n"
          "      --run-id ID          TORCHELASTIC_RUN_ID, the same on every node\n"
          "                           (default 'none', as torchrun)\n"
          "      --grace-seconds S    after a failure or a signal, how long the other\n"
          "                           workers get to exit after SIGTERM before SIGKILL\n"
          "                           (default 10)\n"
          "      --no-prefix          do not prefix: workers write straight to the\n"
          "                           launcher's stdout and stderr\n"
          "  -h, --help               this help\n"
          "\n"
          "torchrun's spellings (--nproc_per_node, --node_rank, --master_addr,\n"
          "--master_port, --rdzv_id / --rdzv-id) are accepted too, as is --opt=VALUE.\n"
          "SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to the workers; the\n"
          "launcher then exits with 128 + the signal's number. A second signal\n"
          "SIGKILLs the workers at once.\n"
          "\n"
          "exit status: 0 when every worker exits 0; the first failed worker's status;\n"
          "128 + N after signal N; 2 for a bad command line; 126 / 127 when PROGRAM\n"
          "is not executable / not found.\n");
}

static void die_usage(const char *fmt, ...) {
  va_list ap;
  fputs(PROG ": ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputs(" (see " PROG " --help)\n", stderr);
  exit(EXIT_USAGE);
}

/* An integer in [lo, hi], or a usage error naming the option and the value. */
static int parse_int(const char *opt, const char *value, long lo, long hi) {
  char *end = NULL;
  errno = 0;
  long v = strtol(value, &end, 10);
  if (value[0] == '\0' || *end != '\0' || errno != 0 || value[0] == ' ' || value[0] == '\t')
    die_usage("%s: '%s' is not an integer", opt, value);
  if (v < lo || v > hi) die_usage("%s: %ld is out of range [%ld, %ld]", opt, v, lo, hi);
  return (int)v;
}

static int parse_nproc(const char *opt, const char *value) {
  if (strcmp(value, "cpu") == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > MAX_NPROC) n = MAX_NPROC;
    return (int)n;
  }
  if (strcmp(value, "auto") == 0 || strcmp(value, "gpu") == 0)
    die_usage("%s: '%s' is not supported here; give a number or 'cpu'", opt, value);
  return parse_int(opt, value, 1, MAX_NPROC);
}

static double parse_seconds(const char *opt, const char *value) {
  char *end = NULL;
  errno = 0;
  double v = strtod(value, &end);
  if (value[0] == '\0' || *end != '\0' || errno != 0 || !(v >= 0.0 && v <= 86400.0))
    die_usage("%s: '%s' is not a number of seconds in [0, 86400]", opt, value);
  return v;
}

/* The option's canonical name: "--" + name with '_' turned into '-',
 * without any "=VALUE"; written into buf. */
static const char *canonical(const char *arg, char *buf, size_t size) {
  size_t i = 0;
  for (; arg[i] != '\0' && arg[i] != '=' && i + 1 < size; i++) buf[i] = arg[i] == '_' ? '-' : arg[i];
  buf[i] = '\0';
  return buf;
}

static void parse_options(options *o, int argc, char **argv) {
  o->nproc = 1;
  o->nnodes = 1;
  o->node_rank = 0;
  o->master_addr = "127.0.0.1";
  o->master_port = 29500;
  o->run_id = "none";
  o->grace_seconds = 10.0;
  o->no_prefix = 0;
  o->program_argv = NULL;

  int i = 1;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    if (arg[0] != '-' || arg[1] == '\0') break; /* PROGRAM ("-" alone is a program name) */
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      exit(0);
    }
    char name[64];
    const char *value = NULL;
    if (arg[1] != '-') { /* short options: -n N, -nN */
      if (arg[1] != 'n') die_usage("unknown option '%s'", arg);
      snprintf(name, sizeof name, "-n");
      if (arg[2] != '\0') value = arg[2] == '=' ? arg + 3 : arg + 2;
    } else {
      canonical(arg, name, sizeof name);
      const char *eq = strchr(arg, '=');
      if (eq != NULL) value = eq + 1;
    }

    if (strcmp(name, "--no-prefix") == 0) {
      if (value != NULL) die_usage("%s takes no value", name);
      o->no_prefix = 1;
      continue;
    }
    int known = strcmp(name, "-n") == 0 || strcmp(name, "--nproc-per-node") == 0 ||
                strcmp(name, "--nnodes") == 0 || strcmp(name, "--node-rank") == 0 ||
                strcmp(name, "--master-addr") == 0 || strcmp(name, "--master-port") == 0 ||
                strcmp(name, "--run-id") == 0 || strcmp(name, "--rdzv-id") == 0 ||
                strcmp(name, "--grace-seconds") == 0;
    if (!known) die_usage("unknown option '%s'", arg);
    if (value == NULL) {
      if (i + 1 >= argc) die_usage("%s needs a value", name);
      value = argv[++i];
    }
    if (strcmp(name, "-n") == 0 || strcmp(name, "--nproc-per-node") == 0) {
      o->nproc = parse_nproc(name, value);
    } else if (strcmp(name, "--nnodes") == 0) {
      if (strchr(value, ':') != NULL)
        die_usage("--nnodes: '%s': elastic ranges (MIN:MAX) are not supported; give one number", value);
      o->nnodes = parse_int(name, value, 1, MAX_NNODES);
    } else if (strcmp(name, "--node-rank") == 0) {
      o->node_rank = parse_int(name, value, 0, MAX_NNODES - 1);
    } else if (strcmp(name, "--master-addr") == 0) {
      if (value[0] == '\0' || strpbrk(value, " \t\n") != NULL)
        die_usage("--master-addr: '%s' is not a host name or address", value);
      o->master_addr = value;
    } else if (strcmp(name, "--master-port") == 0) {
      o->master_port = parse_int(name, value, 1, 65535);
    } else if (strcmp(name, "--run-id") == 0 || strcmp(name, "--rdzv-id") == 0) {
      if (value[0] == '\0') die_usage("%s: the run id must not be empty", name);
      o->run_id = value;
    } else if (strcmp(name, "--grace-seconds") == 0) {
      o->grace_seconds = parse_seconds(name, value);
    }
  }
  if (i >= argc) die_usage("no PROGRAM given");
  o->program_argv = argv + i;
  if (o->node_rank >= o->nnodes)
    die_usage("--node-rank %d is not below --nnodes %d (node ranks are 0 .. %d)", o->node_rank,
              o->nnodes, o->nnodes - 1);
  if ((long long)o->nnodes * o->nproc > INT_MAX)
    die_usage("--nnodes %d x --nproc-per-node %d is too large a world", o->nnodes, o->nproc);
}

/* ------------------------------------------------------- finding PROGRAM */

/* The path execve() should run, as execvp() would find it; NULL with *code
 * set to 127 (not found) or 126 (found, not executable), and *why. */
static char *resolve_program(const char *prog, int *code, const char **why) {
  struct stat st;
  if (prog[0] == '\0') {
    *code = EXIT_NOT_FOUND;
    *why = "command not found";
    return NULL;
  }
  if (strchr(prog, '/') != NULL) {
    if (stat(prog, &st) != 0) {
      *code = errno == EACCES ? EXIT_NOT_EXECUTABLE : EXIT_NOT_FOUND;
      *why = strerror(errno);
      return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
      *code = EXIT_NOT_EXECUTABLE;
      *why = "is a directory";
      return NULL;
    }
    if (access(prog, X_OK) != 0) {
      *code = EXIT_NOT_EXECUTABLE;
      *why = "not executable (Permission denied)";
      return NULL;
    }
    char *p = strdup(prog);
    if (p == NULL) {
      *code = EXIT_INTERNAL;
      *why = "out of memory";
    }
    return p;
  }
  const char *path = getenv("PATH");
  if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
  int found_not_executable = 0;
  size_t plen = strlen(prog);
  for (const char *dir = path;; ) {
    const char *colon = strchr(dir, ':');
    size_t dlen = colon != NULL ? (size_t)(colon - dir) : strlen(dir);
    char *cand = malloc(dlen + plen + 3);
    if (cand == NULL) {
      *code = EXIT_INTERNAL;
      *why = "out of memory";
      return NULL;
    }
    if (dlen == 0) /* an empty PATH entry is the current directory */
      snprintf(cand, dlen + plen + 3, "./%s", prog);
    else
      snprintf(cand, dlen + plen + 3, "%.*s/%s", (int)dlen, dir, prog);
    if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(cand, X_OK) == 0) return cand;
      found_not_executable = 1;
    }
    free(cand);
    if (colon == NULL) break;
    dir = colon + 1;
  }
  *code = found_not_executable ? EXIT_NOT_EXECUTABLE : EXIT_NOT_FOUND;
  *why = found_not_executable ? "not executable (Permission denied)" : "command not found in PATH";
  return NULL;
}

/* --------------------------------------------------------------- workers */

typedef struct {
  int fd;     /* read end of the worker's pipe; -1 when closed */
  int out_fd; /* 1 or 2: where its lines go */
  char *buf;  /* the line being assembled */
  size_t len, cap;
} stream;

typedef struct {
  pid_t pid;
  int local_rank, rank;
  int running;
  int stop_sent; /* the launcher sent it a signal (its exit is not a new failure) */
  char prefix[32];
  size_t prefix_len;
  stream s[2];
} worker;

static worker *workers;
static int nworkers, live;
static int out_broken[3]; /* stdout / stderr of the launcher no longer writable */

/* The self-pipe: signal handlers write the signal's number, the loop reads it. */
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  ssize_t r = write(sig_pipe[1], &b, 1);
  (void)r; /* a full pipe: the loop is already due to wake up */
  errno = saved;
}

static const char *signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return NULL;
  }
}

static void describe_signal(char *buf, size_t size, int sig) {
  const char *name = signal_name(sig);
  if (name != NULL)
    snprintf(buf, size, "signal %d (%s)", sig, name);
  else
    snprintf(buf, size, "signal %d", sig);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes all of buf to fd; after a write error (a closed pipe: EPIPE) that
 * output is dropped from then on, and the workers go on. */
static void write_all(int fd, const char *buf, size_t len) {
  if (out_broken[fd]) return;
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) { /* inherited O_NONBLOCK */
        struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
        poll(&p, 1, 100);
        continue;
      }
      out_broken[fd] = 1;
      return;
    }
    buf += w;
    len -= (size_t)w;
  }
}

/* The launcher's own messages: one line on stderr, "tptrain-run: ..." */
static void say(const char *fmt, ...) {
  char line[1024];
  int n = snprintf(line, sizeof line, PROG ": ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof line - 2) len = sizeof line - 2;
  line[len++] = '\n';
  write_all(2, line, len);
}

static char *scratch;
static size_t scratch_cap;

static int reserve(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 1;
  size_t c = *cap ? *cap : 4096;
  while (c < need) c *= 2;
  char *b = realloc(*buf, c);
  if (b == NULL) return 0;
  *buf = b;
  *cap = c;
  return 1;
}

/* Writes out every complete line in the stream's buffer, each prefixed,
 * with one write per call; with final set, the rest too (a partial line at
 * EOF gets its newline). A line of MAX_LINE bytes without a newline is
 * written as a line of its own. */
static void emit_lines(worker *w, stream *s, int final) {
  size_t start = 0, out = 0;
  for (;;) {
    char *nl = memchr(s->buf + start, '\n', s->len - start);
    size_t end; /* one past the line's last byte, newline excluded */
    size_t next;
    if (nl != NULL) {
      end = (size_t)(nl - s->buf);
      next = end + 1;
    } else if (s->len - start >= MAX_LINE || (final && s->len > start)) {
      end = s->len;
      next = s->len;
    } else {
      break;
    }
    size_t n = end - start;
    if (!reserve(&scratch, &scratch_cap, out + w->prefix_len + n + 1)) {
      /* out of memory: write what is assembled, then this line in pieces */
      write_all(s->out_fd, scratch, out);
      out = 0;
      write_all(s->out_fd, w->prefix, w->prefix_len);
      write_all(s->out_fd, s->buf + start, n);
      write_all(s->out_fd, "\n", 1);
    } else {
      memcpy(scratch + out, w->prefix, w->prefix_len);
      out += w->prefix_len;
      memcpy(scratch + out, s->buf + start, n);
      out += n;
      scratch[out++] = '\n';
    }
    start = next;
  }
  if (out > 0) write_all(s->out_fd, scratch, out);
  if (start > 0) {
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
  }
}

static void close_stream(worker *w, stream *s) {
  if (s->fd < 0) return;
  emit_lines(w, s, 1);
  close(s->fd);
  s->fd = -1;
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
}

/* Reads once (drain = 0) or until the pipe is empty (drain = 1). */
static void pump(worker *w, stream *s, int drain) {
  while (s->fd >= 0) {
    if (!reserve(&s->buf, &s->cap, s->len + READ_CHUNK)) {
      emit_lines(w, s, 1); /* out of memory: give up the partial line */
      if (!reserve(&s->buf, &s->cap, s->len + READ_CHUNK)) {
        close_stream(w, s);
        return;
      }
    }
    ssize_t r = read(s->fd, s->buf + s->len, READ_CHUNK);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      close_stream(w, s);
      return;
    }
    if (r == 0) {
      close_stream(w, s);
      return;
    }
    s->len += (size_t)r;
    emit_lines(w, s, 0);
    if (!drain) return;
  }
}

/* ------------------------------------------------------------- stopping */

static int exit_code = -1;   /* decided by the first failure or signal */
static int stopping = 0;     /* SIGTERM (or the forwarded signal) sent */
static int killed = 0;       /* SIGKILL sent */
static double deadline = 0;  /* when stopping: when to SIGKILL */
static double grace = 10.0;

static void signal_workers(int sig) {
  for (int i = 0; i < nworkers; i++)
    if (workers[i].running) {
      kill(workers[i].pid, sig);
      workers[i].stop_sent = 1;
    }
}

static void begin_stop(int sig) {
  stopping = 1;
  signal_workers(sig);
  deadline = now_seconds() + grace;
}

static void kill_all(const char *why) {
  for (int i = 0; i < nworkers; i++)
    if (workers[i].running) {
      say("rank %d (pid %ld) %s: sending SIGKILL", workers[i].rank, (long)workers[i].pid, why);
      kill(workers[i].pid, SIGKILL);
      workers[i].stop_sent = 1;
    }
  killed = 1;
}

static void grace_text(char *buf, size_t size) {
  snprintf(buf, size, "%g s", grace);
}

/* Reaps every worker that has ended; the first failure stops the others. */
static void reap(void) {
  for (;;) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;
    worker *w = NULL;
    for (int i = 0; i < nworkers; i++)
      if (workers[i].running && workers[i].pid == pid) w = &workers[i];
    if (w == NULL) continue;
    w->running = 0;
    live--;
    /* its last words first, then what the launcher says about it */
    pump(w, &w->s[0], 1);
    pump(w, &w->s[1], 1);

    int failed = 0, code = 0;
    char how[96];
    if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
      failed = 1;
      code = WEXITSTATUS(st);
      snprintf(how, sizeof how, "exited with status %d", code);
    } else if (WIFSIGNALED(st)) {
      failed = 1;
      code = 128 + WTERMSIG(st);
      char sigtext[48];
      describe_signal(sigtext, sizeof sigtext, WTERMSIG(st));
      snprintf(how, sizeof how, "was killed by %s", sigtext);
    }
    if (!failed || exit_code >= 0 || w->stop_sent) continue;
    exit_code = code;
    if (live > 0) {
      char g[48];
      grace_text(g, sizeof g);
      char others[32];
      if (live == 1)
        snprintf(others, sizeof others, "the other worker");
      else
        snprintf(others, sizeof others, "the other %d workers", live);
      say("rank %d (local rank %d, pid %ld) %s; stopping %s (SIGTERM, SIGKILL after %s)", w->rank,
          w->local_rank, (long)pid, how, others, g);
      begin_stop(SIGTERM);
    } else {
      say("rank %d (local rank %d, pid %ld) %s", w->rank, w->local_rank, (long)pid, how);
    }
  }
}

/* SIGINT, SIGTERM, SIGHUP or SIGQUIT to the launcher. */
static void on_launcher_signal(int sig) {
  const char *name = signal_name(sig);
  if (!stopping) {
    if (exit_code < 0) exit_code = 128 + sig;
    if (live > 0) {
      char g[48];
      grace_text(g, sizeof g);
      say("received %s: forwarding it to the %d worker%s (SIGKILL after %s)", name, live,
          live == 1 ? "" : "s", g);
    }
    begin_stop(sig);
  } else if (!killed && live > 0) {
    say("received %s again", name);
    kill_all("still running");
  }
}

/* ------------------------------------------------------------- starting */

/* Environment of one worker: the launcher's, less the names set here, plus
 * torchrun's variables. */
static char **worker_env(const options *o, int local_rank, int omp_default) {
  static const char *const set_names[] = {
      "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
      "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
      "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
      "TORCHELASTIC_USE_AGENT_STORE"};
  const size_t nset = sizeof set_names / sizeof set_names[0];
  size_t n = 0;
  while (environ[n] != NULL) n++;
  char **env = calloc(n + nset + 4, sizeof *env);
  if (env == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (size_t j = 0; j < nset && !skip; j++) {
      size_t l = strlen(set_names[j]);
      skip = strncmp(environ[i], set_names[j], l) == 0 && environ[i][l] == '=';
    }
    if (!skip) env[k++] = environ[i];
  }
  long world = (long)o->nnodes * o->nproc;
  long rank = (long)o->node_rank * o->nproc + local_rank;
#define ADD(fmt, ...)                                              \
  do {                                                             \
    int len_ = snprintf(NULL, 0, fmt, __VA_ARGS__);                \
    char *s_ = malloc((size_t)len_ + 1);                           \
    if (s_ == NULL) return NULL;                                   \
    snprintf(s_, (size_t)len_ + 1, fmt, __VA_ARGS__);              \
    env[k++] = s_;                                                 \
  } while (0)
  ADD("MASTER_ADDR=%s", o->master_addr);
  ADD("MASTER_PORT=%d", o->master_port);
  ADD("WORLD_SIZE=%ld", world);
  ADD("RANK=%ld", rank);
  ADD("LOCAL_RANK=%d", local_rank);
  ADD("LOCAL_WORLD_SIZE=%d", o->nproc);
  ADD("GROUP_RANK=%d", o->node_rank);
  ADD("GROUP_WORLD_SIZE=%d", o->nnodes);
  ADD("ROLE_RANK=%ld", rank);
  ADD("ROLE_WORLD_SIZE=%ld", world);
  ADD("ROLE_NAME=%s", "default");
  ADD("TORCHELASTIC_RUN_ID=%s", o->run_id);
  ADD("TORCHELASTIC_RESTART_COUNT=%d", 0);
  ADD("TORCHELASTIC_MAX_RESTARTS=%d", 0);
  /* torchrun says True when its agent hosts the store (static rendezvous);
   * no store is hosted here, so rank 0 must create it */
  ADD("TORCHELASTIC_USE_AGENT_STORE=%s", "False");
  if (getenv("NCCL_ASYNC_ERROR_HANDLING") == NULL) ADD("NCCL_ASYNC_ERROR_HANDLING=%d", 1);
  if (omp_default) ADD("OMP_NUM_THREADS=%d", 1);
  /* the workers' trainers stop gracefully on the SIGTERM forwarded to them,
   * saving a checkpoint (tpt_trainer_options.stop_on_signals) */
  if (getenv("TPTRAIN_STOP_ON_SIGNALS") == NULL) ADD("TPTRAIN_STOP_ON_SIGNALS=%d", 1);
#undef ADD
  env[k] = NULL;
  return env;
}

/* PROGRAM's arguments with "${local_rank}" replaced, as torchrun's macro. */
static char **worker_argv(char **argv, int local_rank) {
  static const char macro[] = "${local_rank}";
  size_t n = 0;
  while (argv[n] != NULL) n++;
  char **out = calloc(n + 1, sizeof *out);
  if (out == NULL) return NULL;
  char lr[16];
  snprintf(lr, sizeof lr, "%d", local_rank);
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || strstr(argv[i], macro) == NULL) {
      out[i] = argv[i];
      continue;
    }
    size_t len = strlen(argv[i]) + sizeof lr; /* the number is shorter than the macro */
    char *s = malloc(len);
    if (s == NULL) return NULL;
    s[0] = '\0';
    const char *p = argv[i];
    for (const char *m; (m = strstr(p, macro)) != NULL; p = m + sizeof macro - 1) {
      strncat(s, p, (size_t)(m - p));
      strcat(s, lr);
    }
    strcat(s, p);
    out[i] = s;
  }
  out[n] = NULL;
  return out;
}

static int set_cloexec_nonblock(int fd, int nonblock) {
  int fl = fcntl(fd, F_GETFD);
  if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) return -1;
  if (nonblock) {
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
  }
  return 0;
}

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NHANDLED ((int)(sizeof handled_signals / sizeof handled_signals[0]))
static int handled[NHANDLED];    /* 0: the launcher was started with it ignored */
static int sigpipe_was_ignored;

/* In the child, between fork and exec: only async-signal-safe calls. */
static void exec_worker(const char *path, char **argv, char **envp, int out_fd, int err_fd,
                        pid_t parent, const sigset_t *mask) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(EXIT_INTERNAL); /* the launcher is already gone */
#else
  (void)parent;
#endif
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int i = 0; i < NHANDLED; i++)
    if (handled[i]) sigaction(handled_signals[i], &dfl, NULL);
  sigaction(SIGCHLD, &dfl, NULL);
  if (!sigpipe_was_ignored) sigaction(SIGPIPE, &dfl, NULL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  if (out_fd >= 0) {
    if (dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(EXIT_INTERNAL);
  }
  execve(path, argv, envp);
  int e = errno;
  static const char msg1[] = PROG ": cannot execute ";
  ssize_t r = write(2, msg1, sizeof msg1 - 1);
  r = write(2, path, strlen(path));
  r = write(2, ": ", 2);
  const char *es = strerror(e); /* not async-signal-safe, but the process is single-threaded */
  r = write(2, es, strlen(es));
  r = write(2, "\n", 1);
  (void)r;
  _exit(e == ENOENT ? EXIT_NOT_FOUND : EXIT_NOT_EXECUTABLE);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  options o;
  parse_options(&o, argc, argv);
  grace = o.grace_seconds;

  int code = 0;
  const char *why = NULL;
  char *path = resolve_program(o.program_argv[0], &code, &why);
  if (path == NULL) {
    fprintf(stderr, PROG ": %s: %s\n", o.program_argv[0], why);
    return code;
  }

  int omp_default = o.nproc > 1 && getenv("OMP_NUM_THREADS") == NULL;
  if (omp_default)
    say("setting OMP_NUM_THREADS=1 for each worker (%d workers on this node and OMP_NUM_THREADS "
        "is not set), as torchrun does, to avoid overloading the machine; set it to tune",
        o.nproc);

  /* signals: a self-pipe; SIGPIPE ignored (a closed stdout drops output) */
  if (pipe(sig_pipe) != 0 || set_cloexec_nonblock(sig_pipe[0], 1) != 0 ||
      set_cloexec_nonblock(sig_pipe[1], 1) != 0) {
    say("cannot create a pipe: %s", strerror(errno));
    return EXIT_INTERNAL;
  }
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < NHANDLED; i++) {
    sigaction(handled_signals[i], NULL, &old);
    /* started with it ignored (a background job of a script): keep it so,
     * for the workers too, as a shell would */
    handled[i] = handled_signals[i] == SIGTERM || old.sa_handler != SIG_IGN;
    if (handled[i]) sigaction(handled_signals[i], &sa, NULL);
  }
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, &old);
  sigpipe_was_ignored = old.sa_handler == SIG_IGN;

  nworkers = o.nproc;
  workers = calloc((size_t)nworkers, sizeof *workers);
  if (workers == NULL) {
    say("out of memory");
    return EXIT_INTERNAL;
  }

  sigset_t all, prev;
  sigfillset(&all);
  pid_t self = getpid();
  for (int lr = 0; lr < nworkers; lr++) {
    worker *w = &workers[lr];
    w->local_rank = lr;
    w->rank = o.node_rank * o.nproc + lr;
    w->prefix_len = (size_t)snprintf(w->prefix, sizeof w->prefix, "[rank %d] ", w->rank);
    w->s[0].fd = w->s[1].fd = -1;
    w->s[0].out_fd = 1;
    w->s[1].out_fd = 2;
    char **envp = worker_env(&o, lr, omp_default);
    char **wargv = worker_argv(o.program_argv, lr);
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    const char *failed = NULL;
    if (envp == NULL || wargv == NULL) {
      failed = "out of memory";
      errno = ENOMEM;
    }
    if (failed == NULL && !o.no_prefix &&
        (pipe(po) != 0 || pipe(pe) != 0 || set_cloexec_nonblock(po[0], 1) != 0 ||
         set_cloexec_nonblock(pe[0], 1) != 0 || set_cloexec_nonblock(po[1], 0) != 0 ||
         set_cloexec_nonblock(pe[1], 0) != 0))
      failed = "cannot create pipes";
    pid_t pid = -1;
    if (failed == NULL) {
      /* signals blocked across fork: the child must not run our handlers */
      sigprocmask(SIG_SETMASK, &all, &prev);
      pid = fork();
      if (pid == 0) exec_worker(path, wargv, envp, po[1], pe[1], self, &prev);
      int e = errno;
      sigprocmask(SIG_SETMASK, &prev, NULL);
      if (pid < 0) {
        errno = e;
        failed = "cannot fork";
      }
    }
    if (po[1] >= 0) close(po[1]);
    if (pe[1] >= 0) close(pe[1]);
    /* envp and wargv: kept until exit (a few strings per worker) */
    if (failed != NULL) {
      say("%s for rank %d: %s; stopping the %d worker%s started", failed, w->rank, strerror(errno),
          live, live == 1 ? "" : "s");
      if (po[0] >= 0) close(po[0]);
      if (pe[0] >= 0) close(pe[0]);
      nworkers = lr;
      if (exit_code < 0) exit_code = EXIT_INTERNAL;
      begin_stop(SIGTERM);
      break;
    }
    w->pid = pid;
    w->running = 1;
    w->s[0].fd = po[0];
    w->s[1].fd = pe[0];
    live++;
  }

  struct pollfd *fds = calloc((size_t)nworkers * 2 + 1, sizeof *fds);
  stream **fd_stream = calloc((size_t)nworkers * 2 + 1, sizeof *fd_stream);
  worker **fd_worker = calloc((size_t)nworkers * 2 + 1, sizeof *fd_worker);
  if (fds == NULL || fd_stream == NULL || fd_worker == NULL) {
    say("out of memory");
    kill_all("the launcher cannot go on");
    return EXIT_INTERNAL;
  }

  reap(); /* a worker that ended before the handler's byte was read */
  while (live > 0) {
    int n = 0;
    fds[n].fd = sig_pipe[0];
    fds[n].events = POLLIN;
    n++;
    for (int i = 0; i < nworkers; i++)
      for (int j = 0; j < 2; j++)
        if (workers[i].s[j].fd >= 0) {
          fds[n].fd = workers[i].s[j].fd;
          fds[n].events = POLLIN;
          fd_stream[n] = &workers[i].s[j];
          fd_worker[n] = &workers[i];
          n++;
        }
    int timeout = -1;
    if (stopping && !killed) {
      double left = deadline - now_seconds();
      timeout = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
    }
    int r = poll(fds, (nfds_t)n, timeout);
    if (r < 0 && errno != EINTR) {
      say("poll failed: %s", strerror(errno));
      kill_all("the launcher cannot go on");
      if (exit_code < 0) exit_code = EXIT_INTERNAL;
      break;
    }
    if (r > 0) {
      for (int k = 1; k < n; k++)
        if (fds[k].revents != 0) pump(fd_worker[k], fd_stream[k], 0);
      if (fds[0].revents != 0) {
        unsigned char sigs[64];
        ssize_t got;
        while ((got = read(sig_pipe[0], sigs, sizeof sigs)) > 0)
          for (ssize_t k = 0; k < got; k++)
            if (sigs[k] != SIGCHLD) on_launcher_signal(sigs[k]);
        reap();
      }
    }
    if (stopping && !killed && live > 0 && now_seconds() >= deadline) {
      char g[96];
      snprintf(g, sizeof g, "still running %g s after the stop signal", grace);
      kill_all(g);
    }
  }
  /* SIGKILLed workers, or a poll failure: wait for what is left */
  while (live > 0) {
    int st;
    pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    for (int i = 0; i < nworkers; i++)
      if (workers[i].running && workers[i].pid == pid) {
        workers[i].running = 0;
        live--;
      }
  }
  /* what the workers wrote before they ended; a pipe that a worker's own
   * child still holds open is not waited for */
  for (int i = 0; i < nworkers; i++)
    for (int j = 0; j < 2; j++) {
      pump(&workers[i], &workers[i].s[j], 1);
      close_stream(&workers[i], &workers[i].s[j]);
    }
  free(path);
  return exit_code < 0 ? 0 : exit_code;
}
