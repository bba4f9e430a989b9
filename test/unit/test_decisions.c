/*
 * The decision log: the memory bound it documents, the per-record bounds
 * (rows, victims, string cuts), wrap-around of the ring, lookups by pod,
 * and recording from many threads while readers copy records out.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <flextopo/decisions.h>
#include <flextopo/error.h>

static ft_decisions_t *log_new(unsigned capacity)
{
	ft_decisions_t *log = NULL;

	assert_int_equal(ft_decisions_new(&log, capacity), 0);
	return log;
}

/* A filter decision about pod default/<name> with `nodes` passing rows. */
static void filter_decision(ft_decision_t *d, const char *name, unsigned nodes)
{
	char node[32];

	ft_decision_init(d, FT_VERB_FILTER, "default", name, name, 0);
	for (unsigned i = 0; i < nodes; i++) {
		snprintf(node, sizeof(node), "node-%u", i);
		ft_decision_add_node(d, node, FT_VERDICT_PASS, NULL);
	}
}

static void test_decisions__memory_bound(void **state)
{
	ft_decisions_t *log = NULL;

	/* The bound decisions.h documents, on the LP64 machines we build. */
	assert_int_equal(sizeof(ft_decision_t), FT_DECISION_BYTES);
	assert_int_equal(ft_decisions_footprint(1024),
			 FT_DECISIONS_HEADER_BYTES + 1024 * FT_DECISION_BYTES);
	assert_int_equal(ft_decisions_footprint(1024), 6316160);
	assert_int_equal(ft_decisions_footprint(1048576), 6467616896ull);
	assert_int_equal(ft_decisions_new(&log, 0), FT_EINVAL);
	assert_null(log);
	log = log_new(3);
	assert_int_equal(ft_decisions_capacity(log), 3);
	assert_int_equal(ft_decisions_count(log), 0);
	ft_decisions_free(log);
	ft_decisions_free(NULL);
}

static void test_decisions__rows_and_victims_are_bounded(void **state)
{
	ft_decision_t d;
	ft_decision_node_t *row = NULL;

	ft_decision_init(&d, FT_VERB_PREEMPT, "ns", "p", "uid-p", 7);
	for (unsigned i = 0; i < FT_DECISION_NODES + 5; i++) {
		ft_decision_node_t *r = ft_decision_add_node(
		    &d, "n", i % 2 ? FT_VERDICT_DROPPED : FT_VERDICT_KEPT,
		    "why");
		if (i < FT_DECISION_NODES)
			assert_non_null(r);
		else
			assert_null(r);
		if (r)
			row = r;
	}
	assert_int_equal(d.n_nodes, FT_DECISION_NODES);
	assert_int_equal(d.n_nodes_total, FT_DECISION_NODES + 5);
	assert_int_equal(d.counts[FT_VERDICT_KEPT] +
			     d.counts[FT_VERDICT_DROPPED],
			 FT_DECISION_NODES + 5);
	for (unsigned i = 0; i < FT_DECISION_VICTIMS + 3; i++)
		ft_decision_add_victim(&d, row, "ns", "v", "uid-v", 1);
	/* A victim of a row that was not kept is counted only. */
	ft_decision_add_victim(&d, NULL, "ns", "v", "uid-v", 1);
	assert_int_equal(d.n_victims, FT_DECISION_VICTIMS);
	assert_int_equal(d.n_victims_total, FT_DECISION_VICTIMS + 4);
	assert_string_equal(d.victims[0].pod, "ns/v");
	assert_int_equal(d.victims[0].row, row - d.nodes);
}

static void test_decisions__long_strings_are_cut_on_utf8(void **state)
{
	char name[600], reason[300];
	ft_decision_t d;
	size_t n;

	/* "é" is two bytes: a cut must not split one. */
	for (n = 0; n + 2 < sizeof(name); n += 2)
		memcpy(name + n, "\xc3\xa9", 2);
	name[n] = '\0';
	memset(reason, 'r', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = '\0';
	ft_decision_init(&d, FT_VERB_FILTER, name, name, name, 0);
	ft_decision_add_node(&d, name, FT_VERDICT_FAIL, reason);
	n = strlen(d.name);
	assert_true(n < FT_DECISION_POD);
	assert_string_equal(d.name + n - 3, "...");
	assert_int_equal((n - 3) % 2, 0);
	assert_true(strlen(d.ns) < FT_DECISION_NS);
	assert_true(strlen(d.uid) < FT_DECISION_UID);
	assert_true(strlen(d.nodes[0].name) < FT_DECISION_NAME);
	assert_int_equal(strlen(d.nodes[0].reason), FT_DECISION_REASON - 1);
	assert_string_equal(d.nodes[0].reason + FT_DECISION_REASON - 4, "...");
	/* A string that fits is copied whole. */
	ft_decision_init(&d, FT_VERB_BIND, "ns", "short", NULL, 0);
	assert_string_equal(d.name, "short");
	assert_string_equal(d.uid, "");
}

static void test_decisions__ring_wraps_around(void **state)
{
	ft_decisions_t *log = log_new(4);
	ft_decision_t d, out[8];
	char name[16];
	unsigned n;

	for (unsigned i = 1; i <= 10; i++) {
		snprintf(name, sizeof(name), "pod-%u", i);
		filter_decision(&d, name, i % 3);
		ft_decisions_record(log, &d);
		assert_int_equal(d.seq, i);
	}
	assert_int_equal(ft_decisions_count(log), 4);
	assert_int_equal(ft_decisions_total(log), 10);
	n = ft_decisions_recent(out, 8, log);
	assert_int_equal(n, 4);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "pod-%u", 10 - i);
		assert_int_equal(out[i].seq, 10 - i);
		assert_string_equal(out[i].name, name);
	}
	assert_int_equal(ft_decisions_recent(out, 2, log), 2);
	assert_int_equal(out[1].seq, 9);
	/* Recording fills in the summary from the counts. */
	assert_string_equal(out[0].message, "1 of 1 nodes pass");
	ft_decisions_free(log);
}

static void test_decisions__lookup_by_pod_and_victim(void **state)
{
	ft_decisions_t *log = log_new(8);
	ft_decision_node_t *row;
	ft_decision_t d, out[8];

	filter_decision(&d, "a", 1);
	ft_decisions_record(log, &d);
	ft_decision_init(&d, FT_VERB_PREEMPT, "default", "b", "b", 100);
	row = ft_decision_add_node(&d, "n0", FT_VERDICT_KEPT, "level nvlink");
	ft_decision_add_victim(&d, row, "default", "a", "a", 0);
	ft_decisions_record(log, &d);
	filter_decision(&d, "c", 1);
	ft_decisions_record(log, &d);

	/* By name: only decisions about "a" itself. */
	assert_int_equal(
	    ft_decisions_for_pod(out, 8, log, "default", "a", NULL), 1);
	assert_int_equal(out[0].verb, FT_VERB_FILTER);
	/* By UID: also the preemption that named it as a victim. */
	assert_int_equal(ft_decisions_for_pod(out, 8, log, NULL, NULL, "a"), 2);
	assert_int_equal(out[0].verb, FT_VERB_PREEMPT);
	assert_int_equal(out[1].verb, FT_VERB_FILTER);
	assert_int_equal(ft_decisions_for_pod(out, 8, log, NULL, NULL, "zz"),
			 0);
	assert_string_equal(
	    out[0].message,
	    "1 of 1 candidate nodes kept (1 with victims flextopo chose), 1 victims");
	ft_decisions_free(log);
}

static void test_decisions__prioritize_summary(void **state)
{
	ft_decision_t d;

	ft_decision_init(&d, FT_VERB_PRIORITIZE, "ns", "p", "u", 0);
	ft_decision_add_score(&d, "a", 3);
	ft_decision_add_score(&d, "b", 9);
	ft_decision_add_score(&d, "c", 9);
	ft_decisions_record(NULL, &d);
	assert_string_equal(d.node, "b");
	assert_int_equal(d.nodes[1].score, 9);
	assert_int_equal(d.nodes[0].level, FT_LEVEL_COUNT);
	assert_string_equal(d.message, "best node b (score 9) of 3");
	assert_string_equal(ft_verb_name(FT_VERB_PRIORITIZE), "prioritize");
	assert_string_equal(ft_verdict_name(FT_VERDICT_KEPT_PROPOSED),
			    "kept-proposed");
}

/* ---- many threads ---- */

enum { WRITERS = 8, PER_WRITER = 2000, CAPACITY = 64 };

typedef struct {
	ft_decisions_t *log;
	unsigned id;
	atomic_int *stop;
	unsigned torn;
} job_t;

static void *writer(void *payload)
{
	job_t *job = payload;
	ft_decision_t d;
	char name[32];

	for (unsigned i = 0; i < PER_WRITER; i++) {
		snprintf(name, sizeof(name), "w%u-%u", job->id, i);
		filter_decision(&d, name, (i % FT_DECISION_NODES) + 1);
		ft_decision_message(&d, false, "%s", name);
		ft_decisions_record(job->log, &d);
	}
	return NULL;
}

/* Every record a reader sees must be whole: its parts agree. */
static void *reader(void *payload)
{
	job_t *job = payload;
	ft_decision_t *out = malloc(CAPACITY * sizeof(*out));

	while (!atomic_load(job->stop)) {
		unsigned n = ft_decisions_recent(out, CAPACITY, job->log);
		for (unsigned i = 0; i < n; i++) {
			const ft_decision_t *d = &out[i];
			job->torn += strcmp(d->name, d->message) != 0 ||
				     strcmp(d->name, d->uid) != 0 ||
				     d->n_nodes != d->n_nodes_total ||
				     (i && d->seq >= out[i - 1].seq);
		}
	}
	free(out);
	return NULL;
}

static void test_decisions__concurrent_recording(void **state)
{
	ft_decisions_t *log = log_new(CAPACITY);
	pthread_t threads[WRITERS + 1];
	job_t jobs[WRITERS + 1];
	atomic_int stop = 0;
	ft_decision_t out[CAPACITY];
	unsigned n;

	for (unsigned i = 0; i <= WRITERS; i++) {
		jobs[i] = (job_t){log, i, &stop, 0};
		assert_int_equal(pthread_create(&threads[i], NULL,
						i < WRITERS ? writer : reader,
						&jobs[i]),
				 0);
	}
	for (unsigned i = 0; i < WRITERS; i++)
		pthread_join(threads[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(threads[WRITERS], NULL);
	assert_int_equal(jobs[WRITERS].torn, 0);
	assert_int_equal(ft_decisions_total(log), WRITERS * PER_WRITER);
	assert_int_equal(ft_decisions_count(log), CAPACITY);
	n = ft_decisions_recent(out, CAPACITY, log);
	assert_int_equal(n, CAPACITY);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(out[i].seq, WRITERS * PER_WRITER - i);
	ft_decisions_free(log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decisions__memory_bound),
	    cmocka_unit_test(test_decisions__rows_and_victims_are_bounded),
	    cmocka_unit_test(test_decisions__long_strings_are_cut_on_utf8),
	    cmocka_unit_test(test_decisions__ring_wraps_around),
	    cmocka_unit_test(test_decisions__lookup_by_pod_and_victim),
	    cmocka_unit_test(test_decisions__prioritize_summary),
	    cmocka_unit_test(test_decisions__concurrent_recording),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
