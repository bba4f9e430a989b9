/*
 * flextopo-bench: how fast the extender answers kube-scheduler, and how much
 * memory its cluster model takes (bench/README.md).
 *
 * For each cluster size N it builds a synthetic cluster in memory (synth.h),
 * loads it into a real ft_app_t the way ft_app_load_snapshot() loads a List
 * and measures the model (bench_memory.h), starts the real HTTP server on
 * 127.0.0.1 in this process (bench_run.h), and times filter and prioritize
 * (bench_verbs.h), then preempt (bench_preempt.h), over one keep-alive
 * connection and without HTTP. Last, in this process, it times the victim
 * search alone on packed 8-GPU nodes (bench_victims.h).
 *
 * Each size runs in a child process, so that RSS and its high-water mark
 * belong to that size alone; the child writes its result_t into memory
 * shared with this process, which prints the report. Every reply is
 * checked: a failed request, a malformed reply or a cluster that did not
 * load as built makes the run fail. No figure is ever asserted. Out of
 * memory, or any other failure, ends the run for that size with a message.
 */
#include <curl/curl.h>

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_dra.h"
#include "bench_memory.h"
#include "bench_options.h"
#include "bench_preempt.h"
#include "bench_result.h"
#include "bench_run.h"
#include "bench_util.h"
#include "bench_verbs.h"
#include "bench_victims.h"
#include "synth.h"

#ifndef FT_SOURCE_DIR
#define FT_SOURCE_DIR "."
#endif

/* Everything for one cluster size; fills `r`. */
static int run_size(result_t *r, const bench_options_t *o, unsigned n)
{
	run_t run;
	bench_verbs_t *verbs = NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	r->nodes = n;
	bench_run_init(&run, r, o, n);
	bench_run_progress(&run, "building and loading the cluster");
	if ((rc = bench_run_setup(&run)) < 0 ||
	    (rc = bench_memory_load(&run)) < 0 ||
	    (rc = bench_run_start(&run)) < 0 ||
	    (rc = bench_verbs_new(&verbs, &run)) < 0 ||
	    (rc = bench_verbs_measure(verbs, &run)) < 0)
		goto cleanup;
	/* Memory as filter and prioritize leave it, before the preempt
	 * requests and the decisions they record. */
	bench_memory_sample(r);
	if ((rc = bench_preempt_run(&run)) < 0)
		goto cleanup;
	r->ok = true;
cleanup:
	bench_verbs_free(verbs);
	bench_run_dispose(&run);
	r->done = true;
	return rc;
}

/* run_size in a child, so that VmRSS and VmHWM are this size's alone. */
static int run_isolated(result_t *r, const bench_options_t *o, unsigned n)
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return run_size(r, o, n);
	if (pid == 0) {
		int rc = run_size(r, o, n);
		fflush(NULL);
		_exit(rc == 0 ? 0 : 1);
	}
	if (waitpid(pid, &status, 0) < 0 || !r->done) {
		r->nodes = n;
		snprintf(r->error, sizeof(r->error),
			 "the run for %u nodes died (wait status %d)", n,
			 status);
	}
	return r->ok ? 0 : -1;
}

/* ---- report ---- */

static void print_header(const bench_options_t *o)
{
	printf("flextopo-bench: seed %llu, %ld CPUs online, server threads: ",
	       (unsigned long long)o->seed, sysconf(_SC_NPROCESSORS_ONLN));
	if (o->threads)
		printf("%u", o->threads);
	else
		printf("one per core");
	printf(", %s, load: %s",
	       o->fixed_uids ? "one pod uid per shape"
			     : "a new pod uid per iteration",
	       o->via_file ? "List file + ft_app_load_snapshot"
			   : "objects applied one by one");
	if (o->packed || o->tiered)
		printf(", nodes: %s%s%s", o->packed ? "packed" : "",
		       o->packed && o->tiered ? ", " : "",
		       o->tiered ? "tiered priorities" : "");
	printf(", fragmentationWindow %s",
	       o->frag_window ? o->frag_window : "64 (default)");
	printf("\n\n");
}

static int print_report(const bench_options_t *o, const result_t *res,
			unsigned n, const micro_t *mc)
{
	int rc = 0;

	print_header(o);
	bench_verbs_print_latency(res, n);
	bench_memory_print(res, n);
	bench_verbs_print_traffic(res, n);
	bench_preempt_print(o, res, n);
	bench_victims_print(mc);
	/* The aims of bench/README.md, where a measured size matches them.
	 * Never asserted. */
	for (unsigned k = 0; k < n; k++) {
		bench_verbs_print_aim(&res[k]);
		bench_memory_print_aim(&res[k]);
	}
	for (unsigned k = 0; k < n; k++)
		bench_preempt_print_aim(&res[k]);
	bench_victims_print_aims(mc);
	if (mc && !mc->r.ok) {
		fprintf(stderr, "flextopo-bench: victim search: FAILED: %s\n",
			mc->r.error[0] ? mc->r.error : "unknown error");
		rc = -1;
	}
	for (unsigned k = 0; k < n; k++) {
		if (res[k].ok)
			continue;
		fprintf(stderr, "flextopo-bench: %u nodes: FAILED: %s\n",
			res[k].nodes,
			res[k].error[0] ? res[k].error : "unknown error");
		rc = -1;
	}
	return rc;
}

/* ---- flags ---- */

static void usage(FILE *to)
{
	fprintf(
	    to,
	    "usage: flextopo-bench [--nodes N[,N...]]... [--iterations K] [--warmup W]\n"
	    "                      [--seed S] [--threads T] [--fixed-uids] [--via-file]\n"
	    "                      [--packed] [--tiered] [--fragmentation-window N]\n"
	    "                      [--preempt-iterations K]\n"
	    "                      [--victim-iterations K] [--dra-events K]\n"
	    "                      [--source-dir DIR]\n"
	    "  --nodes N[,N...]  cluster sizes, repeatable (default 500,5000)\n"
	    "  --iterations K    timed filter+prioritize pairs per size\n"
	    "                    (default 2000 up to 1000 nodes, else 500)\n"
	    "  --warmup W        untimed pairs first (default K/10)\n"
	    "  --seed S          seed of the synthetic cluster (default 1)\n"
	    "  --threads T       server worker threads (default one per core)\n"
	    "  --fixed-uids      one pod uid per shape instead of a new pod per pair\n"
	    "  --via-file        write the List to a temporary file and load it with\n"
	    "                    ft_app_load_snapshot (default: apply the objects one\n"
	    "                    by one, as ft_app_load_snapshot does)\n"
	    "  --packed          fill every node with %d pods, as the victim search alone\n"
	    "                    does, instead of about half\n"
	    "  --tiered          pods holding GPUs or MIG instances get priority %d more\n"
	    "  --fragmentation-window N\n"
	    "                    the config's fragmentationWindow (default 64; 0 turns\n"
	    "                    the fragmentation penalty of prioritize off)\n"
	    "  --preempt-iterations K\n"
	    "                    timed preempt requests per size (default %u up to 1000\n"
	    "                    nodes, else %u; 0: no preempt)\n"
	    "  --victim-iterations K\n"
	    "                    timed searches per node kind and preemptor in the victim\n"
	    "                    search alone (default %u, at most %.0f s each; 0: skip)\n"
	    "  --dra-events K    watch events per kind and round of the DRA arm, on\n"
	    "                    each size (default %u; 0: skip)\n"
	    "  --source-dir DIR  the tree holding api/examples/ (default %s)\n",
	    PACKED_PODS, TIERED_PRIORITY, PREEMPT_ITERATIONS_SMALL,
	    PREEMPT_ITERATIONS_LARGE, MICRO_ITERATIONS, MICRO_SECONDS_MAX,
	    DRA_EVENTS_DEFAULT, FT_SOURCE_DIR);
}

static int add_sizes(bench_options_t *o, const char *list)
{
	char *copy = strdup(list), *save = NULL, *tok;
	unsigned long n;
	int rc = copy ? 0 : -1;

	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && rc == 0;
	     tok = strtok_r(NULL, ",", &save)) {
		if ((rc = bench_parse_ulong("flextopo-bench", &n, tok, 1,
					    1000000)) == 0 &&
		    o->n_sizes >= SIZES_MAX) {
			fprintf(stderr, "flextopo-bench: at most %d sizes\n",
				SIZES_MAX);
			rc = -1;
		}
		if (rc == 0)
			o->sizes[o->n_sizes++] = (unsigned)n;
	}
	free(copy);
	return rc;
}

static int parse_option(bench_options_t *o, int c, bool *sized)
{
	unsigned long v = 0;

	switch (c) {
	case 'n':
		if (!*sized)
			o->n_sizes = 0;
		*sized = true;
		return add_sizes(o, optarg);
	case 'i':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 1,
				      10000000) < 0)
			return -1;
		o->iterations = (unsigned)v;
		return 0;
	case 'w':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->warmup = (long)v;
		return 0;
	case 's':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      ULONG_MAX) < 0)
			return -1;
		o->seed = v;
		return 0;
	case 't':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 1, 256) < 0)
			return -1;
		o->threads = (unsigned)v;
		return 0;
	case 'f':
		o->fixed_uids = true;
		return 0;
	case 'v':
		o->via_file = true;
		return 0;
	case 'd':
		o->source_dir = optarg;
		return 0;
	case 'p':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->preempt_iterations = (long)v;
		return 0;
	case 'V':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->victim_iterations = (long)v;
		return 0;
	case 'P':
		o->packed = true;
		return 0;
	case 'T':
		o->tiered = true;
		return 0;
	case 'F':
		o->frag_window = optarg;
		return 0;
	case 'D':
		if (bench_parse_ulong("flextopo-bench", &v, optarg, 0,
				      10000000) < 0)
			return -1;
		o->dra_events = (long)v;
		return 0;
	default:
		return -1;
	}
}

/* 0: run; 1: help printed; -1: bad flags. */
static int parse_options(bench_options_t *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"nodes", required_argument, NULL, 'n'},
	    {"iterations", required_argument, NULL, 'i'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"seed", required_argument, NULL, 's'},
	    {"threads", required_argument, NULL, 't'},
	    {"fixed-uids", no_argument, NULL, 'f'},
	    {"via-file", no_argument, NULL, 'v'},
	    {"source-dir", required_argument, NULL, 'd'},
	    {"preempt-iterations", required_argument, NULL, 'p'},
	    {"victim-iterations", required_argument, NULL, 'V'},
	    {"packed", no_argument, NULL, 'P'},
	    {"tiered", no_argument, NULL, 'T'},
	    {"fragmentation-window", required_argument, NULL, 'F'},
	    {"dra-events", required_argument, NULL, 'D'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	bool sized = false;
	int c;

	memset(o, 0, sizeof(*o));
	o->sizes[0] = TARGET_SMALL_NODES;
	o->sizes[1] = TARGET_LARGE_NODES;
	o->n_sizes = 2;
	o->warmup = -1;
	o->preempt_iterations = -1;
	o->victim_iterations = -1;
	o->dra_events = -1;
	o->seed = 1;
	o->source_dir = FT_SOURCE_DIR;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return 1;
		}
		if (parse_option(o, c, &sized) < 0) {
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "flextopo-bench: unexpected \"%s\"\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	bench_options_t o;
	static micro_t mc; /* large */
	static dra_result_t dra[SIZES_MAX];
	result_t *res;
	int rc = parse_options(&o, argc, argv);
	size_t bytes;

	if (rc != 0)
		return rc > 0 ? 0 : 2;
	bytes = o.n_sizes * sizeof(*res);
	res = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (res == MAP_FAILED) {
		perror("flextopo-bench: mmap");
		return 1;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "flextopo-bench: curl_global_init failed\n");
		return 1;
	}
	for (unsigned k = 0; k < o.n_sizes; k++) {
		if (o.n_sizes == 1)
			run_size(&res[k], &o, o.sizes[k]);
		else
			run_isolated(&res[k], &o, o.sizes[k]);
	}
	if (o.victim_iterations != 0)
		bench_victims_run(&mc, &o);
	if (o.dra_events < 0)
		o.dra_events = DRA_EVENTS_DEFAULT;
	for (unsigned k = 0; o.dra_events && k < o.n_sizes; k++)
		bench_dra_run(&dra[k], &o, o.sizes[k]);
	rc = print_report(&o, res, o.n_sizes,
			  o.victim_iterations != 0 ? &mc : NULL);
	if (o.dra_events) {
		bench_dra_print(dra, o.n_sizes);
		for (unsigned k = 0; k < o.n_sizes; k++)
			if (!dra[k].r.ok) {
				fprintf(
				    stderr,
				    "flextopo-bench: DRA arm, %u nodes: FAILED: %s\n",
				    o.sizes[k], dra[k].r.error);
				rc = -1;
			}
	}
	curl_global_cleanup();
	munmap(res, bytes);
	return rc < 0 ? 1 : 0;
}
