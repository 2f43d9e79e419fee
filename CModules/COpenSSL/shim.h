#pragma once
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/ec.h>
#include <openssl/crypto.h>
#include <openssl/obj_mac.h>
#include <openssl/sha.h>
#include <string.h>

// Swift cannot import function-like macros (most of them expand to SSL_ctrl /
// SSL_CTX_ctrl / BIO_ctrl calls), so each one used from Swift gets a typed
// static inline wrapper here.

static inline int shim_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline int shim_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}

static inline int shim_DTLS1_2_VERSION(void) { return DTLS1_2_VERSION; }
static inline int shim_DTLS1_VERSION(void) { return DTLS1_VERSION; }

static inline int shim_DTLS_set_link_mtu(SSL *ssl, long mtu) {
    return (int)DTLS_set_link_mtu(ssl, mtu);
}

/// Returns 1 and fills `seconds`/`microseconds` when a retransmission timer is
/// running, 0 otherwise.
static inline int shim_DTLSv1_get_timeout(SSL *ssl, long *seconds, long *microseconds) {
    struct timeval tv = {0, 0};
    int running = (int)DTLSv1_get_timeout(ssl, &tv);
    if (seconds) *seconds = (long)tv.tv_sec;
    if (microseconds) *microseconds = (long)tv.tv_usec;
    return running;
}

static inline int shim_DTLSv1_handle_timeout(SSL *ssl) {
    return (int)DTLSv1_handle_timeout(ssl);
}

static inline int shim_BIO_set_mem_eof_return(BIO *bio, int value) {
    return (int)BIO_set_mem_eof_return(bio, value);
}

static inline int shim_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}

static inline uint64_t shim_SSL_CTX_set_options(SSL_CTX *ctx, uint64_t options) {
    return (uint64_t)SSL_CTX_set_options(ctx, options);
}

static inline uint64_t shim_SSL_OP_NO_QUERY_MTU(void) { return (uint64_t)SSL_OP_NO_QUERY_MTU; }
static inline uint64_t shim_SSL_OP_NO_TICKET(void) { return (uint64_t)SSL_OP_NO_TICKET; }
static inline uint64_t shim_SSL_OP_CIPHER_SERVER_PREFERENCE(void) {
    return (uint64_t)SSL_OP_CIPHER_SERVER_PREFERENCE;
}
static inline uint64_t shim_SSL_OP_NO_RENEGOTIATION(void) {
    return (uint64_t)SSL_OP_NO_RENEGOTIATION;
}

static inline long shim_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes) {
    return SSL_CTX_set_read_ahead(ctx, yes);
}

// A DTLS context is shared by every connection of a certificate: no session may outlive its
// connection or be resumed by another (resumption would skip the fingerprint check).
static inline long shim_SSL_CTX_disable_session_cache(SSL_CTX *ctx) {
    return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
}
static inline long shim_SSL_set_max_send_fragment(SSL *ssl, long length) {
    return SSL_set_max_send_fragment(ssl, length);
}
static inline void shim_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }

/// ECDSA P-256 key pair (EVP_EC_gen is a macro over EVP_PKEY_Q_keygen).
static inline EVP_PKEY *shim_EVP_EC_gen_P256(void) { return EVP_EC_gen("P-256"); }

static inline int shim_NID_X9_62_prime256v1(void) { return NID_X9_62_prime256v1; }

static inline int shim_MBSTRING_ASC(void) { return MBSTRING_ASC; }

static inline int shim_SSL_VERIFY_PEER_FAIL_IF_NO_PEER_CERT(void) {
    return SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
}

static inline int shim_SSL_is_init_finished(const SSL *ssl) { return SSL_is_init_finished(ssl); }

static inline int shim_BIO_CTRL_FLUSH(void) { return BIO_CTRL_FLUSH; }
static inline int shim_BIO_CTRL_DGRAM_QUERY_MTU(void) { return BIO_CTRL_DGRAM_QUERY_MTU; }
static inline int shim_BIO_CTRL_DGRAM_GET_FALLBACK_MTU(void) { return BIO_CTRL_DGRAM_GET_FALLBACK_MTU; }
static inline int shim_BIO_CTRL_WPENDING(void) { return BIO_CTRL_WPENDING; }
static inline int shim_BIO_CTRL_PENDING(void) { return BIO_CTRL_PENDING; }
static inline int shim_BIO_TYPE_SOURCE_SINK(void) { return BIO_TYPE_SOURCE_SINK; }

static inline int shim_X509_set_notBefore_offset(X509 *x509, long seconds) {
    return X509_gmtime_adj(X509_getm_notBefore(x509), seconds) != NULL;
}
static inline int shim_X509_set_notAfter_offset(X509 *x509, long seconds) {
    return X509_gmtime_adj(X509_getm_notAfter(x509), seconds) != NULL;
}

// HMAC-SHA1 with the key schedule done once: the padded-key states are kept, so a tag costs two
// SHA-1 runs and no allocation (EVP_MAC duplicates a digest context on every reset). Used by the
// SRTP AES-CM profile, whose keys never change during a session.
typedef struct {
    SHA_CTX inner;
    SHA_CTX outer;
} shim_hmac_sha1_key;

static inline void shim_hmac_sha1_key_init(shim_hmac_sha1_key *state, const unsigned char *key, size_t length) {
    unsigned char block[SHA_CBLOCK];
    unsigned char hashed[SHA_DIGEST_LENGTH];
    memset(block, 0, sizeof block);
    if (length > SHA_CBLOCK) {
        SHA1(key, length, hashed);
        memcpy(block, hashed, SHA_DIGEST_LENGTH);
    } else if (length > 0) {
        memcpy(block, key, length);
    }
    unsigned char pad[SHA_CBLOCK];
    for (size_t i = 0; i < SHA_CBLOCK; i++) pad[i] = block[i] ^ 0x36;
    SHA1_Init(&state->inner);
    SHA1_Update(&state->inner, pad, SHA_CBLOCK);
    for (size_t i = 0; i < SHA_CBLOCK; i++) pad[i] = block[i] ^ 0x5c;
    SHA1_Init(&state->outer);
    SHA1_Update(&state->outer, pad, SHA_CBLOCK);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
}

// HMAC-SHA1 over data ‖ suffix (SRTP authenticates the packet followed by its 4-byte ROC).
static inline void shim_hmac_sha1(const shim_hmac_sha1_key *state, const void *data, size_t length,
                                  const void *suffix, size_t suffixLength, unsigned char out[SHA_DIGEST_LENGTH]) {
    SHA_CTX context = state->inner;
    unsigned char innerDigest[SHA_DIGEST_LENGTH];
    SHA1_Update(&context, data, length);
    if (suffixLength > 0) SHA1_Update(&context, suffix, suffixLength);
    SHA1_Final(innerDigest, &context);
    context = state->outer;
    SHA1_Update(&context, innerDigest, SHA_DIGEST_LENGTH);
    SHA1_Final(out, &context);
}

static inline int shim_EVP_CTRL_GCM_SET_TAG(void) { return EVP_CTRL_GCM_SET_TAG; }
static inline int shim_EVP_CTRL_GCM_GET_TAG(void) { return EVP_CTRL_GCM_GET_TAG; }
static inline int shim_EVP_CTRL_GCM_SET_IVLEN(void) { return EVP_CTRL_GCM_SET_IVLEN; }
