/*
 * TLS for the HTTP server: reads the PEM files named in ft_server_options_t
 * once, checks them with GnuTLS so that a wrong file fails at start with a
 * message naming it (libmicrohttpd alone would only say that the daemon did
 * not start), and verifies client certificates request by request.
 *
 * libmicrohttpd takes the certificate, key and client CAs as PEM text and
 * sets up GnuTLS itself. With a client CA it asks each client for a
 * certificate during the handshake but lets a client without one in; the
 * request is then refused here, after the handshake, so that the reply can
 * say why and so that public paths (health checks) stay reachable. GnuTLS
 * checks the chain against the client CAs, the validity period and the
 * extended key usage (TLS client authentication), as Go's crypto/tls does
 * for its own servers.
 *
 * Nothing is reloaded: a renewed certificate needs a restart.
 */
#include "tls.h"

#include <flextopo/error.h>
#include <flextopo/log.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A PEM file above this is not a certificate, key or CA bundle we expect. */
#define PEM_MAX_BYTES ((size_t)1 << 20)

static bool is_set(const char *path)
{
	return path && path[0];
}

/*
 * Read the whole of `path` (what: "TLS certificate", ...) as text, into a
 * buffer of its size. The read buffer is wiped: it may hold a private key.
 */
static int read_pem(char **out, size_t *len, const char *what, const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0;
	int rc = 0;

	if (!f)
		return ft_error_set(FT_EIO, "%s %s: %s", what, path,
				    strerror(errno));
	if (!(buf = malloc(PEM_MAX_BYTES + 1))) {
		rc =
		    ft_error_set(FT_ENOMEM, "%s %s: out of memory", what, path);
		goto cleanup;
	}
	n = fread(buf, 1, PEM_MAX_BYTES + 1, f);
	if (ferror(f))
		rc = ft_error_set(FT_EIO, "%s %s: read error", what, path);
	else if (n > PEM_MAX_BYTES)
		rc = ft_error_set(FT_EINVAL, "%s %s: larger than %zu bytes",
				  what, path, PEM_MAX_BYTES);
	else if (n == 0)
		rc = ft_error_set(FT_EINVAL, "%s %s: empty file", what, path);
	else if (!(*out = malloc(n + 1)))
		rc =
		    ft_error_set(FT_ENOMEM, "%s %s: out of memory", what, path);
	if (rc != 0)
		goto cleanup;
	memcpy(*out, buf, n);
	(*out)[n] = '\0';
	*len = n;
cleanup:
	if (buf)
		explicit_bzero(buf, n);
	free(buf);
	fclose(f);
	return rc;
}

static gnutls_datum_t datum(const char *text, size_t len)
{
	return (gnutls_datum_t){.data = (unsigned char *)text,
				.size = (unsigned)len};
}

static void free_crts(gnutls_x509_crt_t *crts, unsigned n)
{
	for (unsigned i = 0; crts && i < n; i++)
		gnutls_x509_crt_deinit(crts[i]);
	gnutls_free(crts);
}

/* The certificates of a PEM text; FT_EINVAL naming `path` when none. */
static int import_crts(gnutls_x509_crt_t **out, unsigned *n, const char *what,
		       const char *path, const char *text, size_t len)
{
	gnutls_datum_t pem = datum(text, len);
	int rc =
	    gnutls_x509_crt_list_import2(out, n, &pem, GNUTLS_X509_FMT_PEM, 0);

	if (rc == GNUTLS_E_MEMORY_ERROR)
		return ft_error_set(FT_ENOMEM, "%s %s: out of memory", what,
				    path);
	if (rc < 0 || *n == 0) {
		*out = NULL;
		*n = 0;
		return ft_error_set(FT_EINVAL, "%s %s: no PEM certificate (%s)",
				    what, path, gnutls_strerror(rc));
	}
	return 0;
}

/* Whether the private key `key` belongs to the certificate `crt`. */
static bool key_matches(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key)
{
	unsigned char crt_id[64], key_id[64];
	size_t crt_len = sizeof(crt_id), key_len = sizeof(key_id);

	return gnutls_x509_crt_get_key_id(crt, 0, crt_id, &crt_len) == 0 &&
	       gnutls_x509_privkey_get_key_id(key, 0, key_id, &key_len) == 0 &&
	       crt_len == key_len && memcmp(crt_id, key_id, crt_len) == 0;
}

/* Parse the key and check it against the leaf certificate `crt`. */
static int check_key(const ft_tls_t *tls, gnutls_x509_crt_t crt,
		     const ft_server_options_t *opts)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_datum_t pem = datum(tls->key, tls->key_len);
	int rc = gnutls_x509_privkey_init(&key);

	if (rc < 0)
		return ft_error_set(FT_ENOMEM, "TLS key %s: out of memory",
				    opts->tls_key_file);
	rc = gnutls_x509_privkey_import2(key, &pem, GNUTLS_X509_FMT_PEM, NULL,
					 0);
	if (rc < 0)
		rc = ft_error_set(
		    FT_EINVAL,
		    "TLS key %s: no unencrypted PEM private key (%s)",
		    opts->tls_key_file, gnutls_strerror(rc));
	else if (!key_matches(crt, key))
		rc = ft_error_set(
		    FT_EINVAL,
		    "TLS key %s does not match the certificate in %s (the first one, which must be the server's own)",
		    opts->tls_key_file, opts->tls_cert_file);
	gnutls_x509_privkey_deinit(key);
	return rc;
}

/* "2026-05-01T12:00:00Z" */
static void format_time(char *buf, size_t size, time_t t)
{
	struct tm tm;

	if (t == (time_t)-1 || !gmtime_r(&t, &tm) ||
	    !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "(unknown)");
}

/* Say what is served, and warn when it is out of its validity period. */
static void log_leaf(gnutls_x509_crt_t crt, const char *path)
{
	time_t not_before = gnutls_x509_crt_get_activation_time(crt);
	time_t not_after = gnutls_x509_crt_get_expiration_time(crt);
	time_t now = time(NULL);
	gnutls_datum_t dn = {0};
	char until[32];

	format_time(until, sizeof(until), not_after);
	gnutls_x509_crt_get_dn3(crt, &dn, 0);
	if (now > not_after || now < not_before)
		FT_LOG_WARN_MSG(
		    "TLS certificate %s (%s) is not valid now: clients will refuse it (valid until %s)",
		    path, dn.data ? (char *)dn.data : "?", until);
	else
		FT_LOG_INFO_MSG("TLS certificate %s: %s, valid until %s", path,
				dn.data ? (char *)dn.data : "?", until);
	gnutls_free(dn.data);
}

static int load_cert_and_key(ft_tls_t *tls, const ft_server_options_t *opts)
{
	gnutls_x509_crt_t *crts = NULL;
	size_t len = 0;
	unsigned n = 0;
	int rc;

	if ((rc = read_pem(&tls->cert, &len, "TLS certificate",
			   opts->tls_cert_file)) < 0 ||
	    (rc = read_pem(&tls->key, &tls->key_len, "TLS key",
			   opts->tls_key_file)) < 0 ||
	    (rc = import_crts(&crts, &n, "TLS certificate", opts->tls_cert_file,
			      tls->cert, len)) < 0)
		goto cleanup;
	if ((rc = check_key(tls, crts[0], opts)) < 0)
		goto cleanup;
	log_leaf(crts[0], opts->tls_cert_file);
cleanup:
	free_crts(crts, n);
	return rc;
}

static int load_client_ca(ft_tls_t *tls, const char *path)
{
	gnutls_x509_crt_t *crts = NULL;
	size_t len = 0;
	unsigned n = 0;
	int rc;

	if ((rc = read_pem(&tls->client_ca, &len, "TLS client CA", path)) < 0 ||
	    (rc = import_crts(&crts, &n, "TLS client CA", path, tls->client_ca,
			      len)) < 0)
		return rc;
	FT_LOG_INFO_MSG(
	    "TLS client certificates required, verified against %u CA certificate(s) in %s",
	    n, path);
	free_crts(crts, n);
	return 0;
}

static int copy_public_paths(ft_tls_t *tls, const char *const *paths)
{
	size_t n = 0;

	while (paths && paths[n])
		n++;
	if (n == 0)
		return 0;
	if (!(tls->public_paths = calloc(n + 1, sizeof(char *))))
		return ft_error_set(FT_ENOMEM, "TLS: out of memory");
	for (size_t i = 0; i < n; i++) {
		if (!(tls->public_paths[i] = strdup(paths[i])))
			return ft_error_set(FT_ENOMEM, "TLS: out of memory");
	}
	return 0;
}

static int check_options(const ft_server_options_t *opts)
{
	bool cert = is_set(opts->tls_cert_file);
	bool key = is_set(opts->tls_key_file);

	if (cert != key)
		return ft_error_set(
		    FT_EINVAL,
		    "TLS: a certificate file needs a key file and a key file a certificate (got only the %s %s)",
		    cert ? "certificate" : "key",
		    cert ? opts->tls_cert_file : opts->tls_key_file);
	if (!cert && is_set(opts->tls_client_ca_file))
		return ft_error_set(
		    FT_EINVAL,
		    "TLS client CA %s: client certificates need TLS, and no certificate and key are set",
		    opts->tls_client_ca_file);
	return 0;
}

/* A heap, NUL-terminated copy of a GnuTLS datum (PEM text). */
static int datum_text(char **out, size_t *len, const gnutls_datum_t *d)
{
	if (!(*out = malloc(d->size + 1)))
		return ft_error_set(FT_ENOMEM, "TLS: out of memory");
	memcpy(*out, d->data, d->size);
	(*out)[d->size] = '\0';
	if (len)
		*len = d->size;
	return 0;
}

/* The fields of a server certificate valid from a minute ago for a year. */
static int fill_crt(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key)
{
	static const char cn[] = "flextopo-extender";
	unsigned char serial[16];
	time_t now = time(NULL);

	if (gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial)) < 0)
		return -1;
	serial[0] &= 0x7f;
	return gnutls_x509_crt_set_version(crt, 3) < 0 ||
		       gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)) <
			   0 ||
		       gnutls_x509_crt_set_activation_time(crt, now - 60) < 0 ||
		       gnutls_x509_crt_set_expiration_time(
			   crt, now + 365 * 86400) < 0 ||
		       gnutls_x509_crt_set_dn_by_oid(
			   crt, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
			   sizeof(cn) - 1) < 0 ||
		       gnutls_x509_crt_set_key(crt, key) < 0 ||
		       gnutls_x509_crt_set_key_purpose_oid(
			   crt, GNUTLS_KP_TLS_WWW_SERVER, 0) < 0 ||
		       gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256,
					     0) < 0
		   ? -1
		   : 0;
}

/*
 * A certificate made here, self-signed (ECDSA P-256, SHA-256), as
 * kube-scheduler's secure port makes one without --tls-cert-file: the
 * clients that scrape it skip verification and send a bearer token.
 */
static int make_self_signed(ft_tls_t *tls)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	gnutls_datum_t c = {0}, k = {0};
	int rc = 0;

	if (gnutls_x509_privkey_init(&key) < 0 ||
	    gnutls_x509_privkey_generate(
		key, GNUTLS_PK_ECDSA,
		GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0 ||
	    gnutls_x509_crt_init(&crt) < 0 || fill_crt(crt, key) < 0 ||
	    gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c) < 0 ||
	    gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &k) < 0)
		rc = ft_error_set(FT_EIO, "TLS: cannot make a certificate");
	else if ((rc = datum_text(&tls->cert, NULL, &c)) == 0)
		rc = datum_text(&tls->key, &tls->key_len, &k);
	if (k.data)
		explicit_bzero(k.data, k.size);
	gnutls_free(k.data);
	gnutls_free(c.data);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
	return rc;
}

int ft_tls_new(ft_tls_t **out, const ft_server_options_t *opts)
{
	ft_tls_t *tls = NULL;
	int rc;

	*out = NULL;
	if ((rc = check_options(opts)) < 0 ||
	    (!is_set(opts->tls_cert_file) && !opts->tls_self_signed))
		return rc;
	if (!(tls = calloc(1, sizeof(*tls))))
		return ft_error_set(FT_ENOMEM, "TLS: out of memory");
	if (!is_set(opts->tls_cert_file)) {
		rc = make_self_signed(tls);
		goto done;
	}
	if ((rc = load_cert_and_key(tls, opts)) < 0 ||
	    (is_set(opts->tls_client_ca_file) &&
	     (rc = load_client_ca(tls, opts->tls_client_ca_file)) < 0) ||
	    (rc = copy_public_paths(tls, opts->tls_public_paths)) < 0)
		goto cleanup;
done:
	if (rc < 0)
		goto cleanup;
	*out = tls;
	tls = NULL;
cleanup:
	ft_tls_free(tls);
	return rc;
}

static bool is_public(const ft_tls_t *tls, const char *path)
{
	for (size_t i = 0; tls->public_paths && tls->public_paths[i]; i++) {
		if (strcmp(tls->public_paths[i], path) == 0)
			return true;
	}
	return false;
}

/* Why the status bits of a failed verification say no, for the reply. */
static void describe_status(char *why, size_t size, unsigned status)
{
	gnutls_datum_t text = {0};

	size_t len;

	if (gnutls_certificate_verification_status_print(
		status, GNUTLS_CRT_X509, &text, 0) == 0 &&
	    text.data) {
		/* GnuTLS ends each sentence with a space. */
		len = strlen((char *)text.data);
		while (len > 0 && text.data[len - 1] == ' ')
			text.data[--len] = '\0';
		snprintf(why, size, "client certificate refused: %s",
			 (char *)text.data);
	} else
		snprintf(why, size, "client certificate refused (status 0x%x)",
			 status);
	gnutls_free(text.data);
}

bool ft_tls_client_allowed(char *why, size_t size, const ft_tls_t *tls,
			   void *session, const char *path)
{
	gnutls_typed_vdata_st purpose = {
	    .type = GNUTLS_DT_KEY_PURPOSE_OID,
	    .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT};
	unsigned status = 0;
	int rc;

	if (!tls || !tls->client_ca || is_public(tls, path))
		return true;
	if (!session) {
		snprintf(why, size,
			 "no TLS session to take a client certificate from");
		return false;
	}
	rc = gnutls_certificate_verify_peers(session, &purpose, 1, &status);
	if (rc == GNUTLS_E_NO_CERTIFICATE_FOUND)
		snprintf(why, size, "a client certificate is required");
	else if (rc < 0)
		snprintf(why, size, "client certificate: %s",
			 gnutls_strerror(rc));
	else if (status != 0)
		describe_status(why, size, status);
	return rc == 0 && status == 0;
}

void ft_tls_free(ft_tls_t *tls)
{
	if (!tls)
		return;
	if (tls->key)
		explicit_bzero(tls->key, tls->key_len);
	free(tls->key);
	free(tls->cert);
	free(tls->client_ca);
	for (size_t i = 0; tls->public_paths && tls->public_paths[i]; i++)
		free(tls->public_paths[i]);
	free(tls->public_paths);
	free(tls);
}
