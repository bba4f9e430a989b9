/*
 * Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource,
 * quantity.go): a signed decimal number with an optional decimal exponent
 * ("1e3") or a binary (Ki, Mi, Gi, Ti, Pi, Ei) or decimal (n, u, m, k, M, G,
 * T, P, E) suffix. Only the scaled integer forms the scheduler needs are
 * produced: thousandths for CPU and MiB (rounded up) for memory.
 */
#include <flextopo/codec.h>
#include <flextopo/error.h>

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const char *suffix;
	long double factor;
} suffix_t;

static const suffix_t suffixes[] = {
    {"Ki", 1024.0L},
    {"Mi", 1048576.0L},
    {"Gi", 1073741824.0L},
    {"Ti", 1099511627776.0L},
    {"Pi", 1125899906842624.0L},
    {"Ei", 1152921504606846976.0L},
    {"n", 1e-9L},
    {"u", 1e-6L},
    {"m", 1e-3L},
    {"", 1.0L},
    {"k", 1e3L},
    {"M", 1e6L},
    {"G", 1e9L},
    {"T", 1e12L},
    {"P", 1e15L},
    {"E", 1e18L},
};

/* Round up, but forgive the binary representation error of decimal input. */
static long double ceil_exact(long double v)
{
	long double r = roundl(v);

	return fabsl(v - r) <= 1e-9L * (fabsl(v) > 1 ? fabsl(v) : 1) ? r
								     : ceill(v);
}

/* The quantity's value in base units, or FT_EINVAL. */
static int quantity_value(long double *out, const char *text)
{
	const char *p = text, *q;
	size_t digits = 0;
	char *end = NULL;
	long double v;

	if (!text || !*text || isspace((unsigned char)*text))
		goto bad;
	if (*p == '+' || *p == '-')
		p++;
	if (!isdigit((unsigned char)*p) && *p != '.')
		goto bad;
	q = p;
	while (isdigit((unsigned char)*q))
		q++, digits++;
	if (*q == '.')
		for (q++; isdigit((unsigned char)*q); q++)
			digits++;
	if (!digits)
		goto bad;
	if ((*q == 'e' || *q == 'E') &&
	    (isdigit((unsigned char)q[1]) ||
	     ((q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])))) {
		q += (q[1] == '+' || q[1] == '-') ? 2 : 1;
		while (isdigit((unsigned char)*q))
			q++;
		if (*q)
			goto bad; /* an exponent takes no suffix */
	}
	v = strtold(text, &end);
	if (end != q || isnan(v) || isinf(v))
		goto bad;
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		if (strcmp(end, suffixes[i].suffix) == 0) {
			*out = v * suffixes[i].factor;
			return 0;
		}
	}
bad:
	return ft_error_set(FT_EINVAL,
			    "quantity \"%s\": not a Kubernetes quantity",
			    text ? text : "");
}

int ft_quantity_milli(int64_t *out, const char *text)
{
	long double v;
	int rc = quantity_value(&v, text);

	if (rc < 0)
		return rc;
	if (v < 0 && v != 0)
		return ft_error_set(FT_EINVAL, "quantity \"%s\": out of range",
				    text);
	v = ceil_exact(v * 1000.0L);
	if (v < 0 || v > (long double)INT64_MAX / 2)
		return ft_error_set(FT_EINVAL, "quantity \"%s\": out of range",
				    text);
	*out = (int64_t)v;
	return 0;
}

int ft_quantity_mib(uint64_t *out, const char *text)
{
	long double v;
	int rc = quantity_value(&v, text);

	if (rc < 0)
		return rc;
	if (v < 0)
		return ft_error_set(FT_EINVAL, "quantity \"%s\": out of range",
				    text);
	v = ceil_exact(v / 1048576.0L);
	if (v < 0 || v > (long double)UINT64_MAX / 2)
		return ft_error_set(FT_EINVAL, "quantity \"%s\": out of range",
				    text);
	*out = (uint64_t)v;
	return 0;
}
