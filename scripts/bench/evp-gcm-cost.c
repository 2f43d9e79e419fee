// CPU per SRTP-sized AES-128-GCM packet through OpenSSL 3's EVP interface, call by call (issue 15:
// what is left of SRTPSession's per-packet cost once the context is keyed once and only the IV is
// set per packet).
//
//   gcc -O2 -o /tmp/evp-gcm-cost scripts/bench/evp-gcm-cost.c -lcrypto
//   /tmp/evp-gcm-cost [PAYLOAD_BYTES]
//
// Prints, per packet (thread CPU time, best of 3 rounds of 200k): the whole unprotect sequence
// SRTPSession uses (DecryptInit with the IV, AAD update, payload update, SET_TAG, Final), the same
// with the tag passed as a parameter to DecryptInit_ex2, the protect sequence, and the fixed calls
// alone: IV init (OpenSSL 3.0 asks the provider for the IV length through a parameter lookup on
// every init), SET_TAG (an OSSL_PARAM round trip), the 12-byte AAD update, and init + Final.
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

#define ROUNDS 3
#define N 200000
#define MAX 1400

static double best[8];
static void keep(int row, double total) {
    double perPacket = total / N;
    if (best[row] == 0 || perPacket < best[row]) best[row] = perPacket;
}

int main(int argc, char **argv) {
    int size = argc > 1 ? atoi(argv[1]) : 1100;
    if (size <= 0 || size > MAX) return 2;
    unsigned char key[16] = {1, 2, 3}, iv[12] = {4, 5}, aad[12] = {9}, tag[16];
    unsigned char plain[MAX], cipher[MAX], buf[MAX + 16];
    int w;
    memset(plain, 7, sizeof plain);
    EVP_CIPHER_CTX *enc = EVP_CIPHER_CTX_new(), *dec = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(enc, EVP_aes_128_gcm(), NULL, key, NULL);
    EVP_DecryptInit_ex(dec, EVP_aes_128_gcm(), NULL, key, NULL);
    memcpy(cipher, plain, size);
    EVP_EncryptInit_ex(enc, NULL, NULL, NULL, iv);
    EVP_EncryptUpdate(enc, NULL, &w, aad, 12);
    EVP_EncryptUpdate(enc, cipher, &w, cipher, size);
    EVP_EncryptFinal_ex(enc, buf, &w);
    EVP_CIPHER_CTX_ctrl(enc, EVP_CTRL_GCM_GET_TAG, 16, tag);

    int failures = 0;
    for (int round = 0; round < ROUNDS; round++) {
        double t = now();
        for (int i = 0; i < N; i++) {
            memcpy(buf, cipher, size);
            EVP_DecryptInit_ex(dec, NULL, NULL, NULL, iv);
            EVP_DecryptUpdate(dec, NULL, &w, aad, 12);
            EVP_DecryptUpdate(dec, buf, &w, buf, size);
            EVP_CIPHER_CTX_ctrl(dec, EVP_CTRL_GCM_SET_TAG, 16, tag);
            failures += EVP_DecryptFinal_ex(dec, buf + size, &w) <= 0;
        }
        keep(0, now() - t);

        t = now();
        for (int i = 0; i < N; i++) {
            memcpy(buf, cipher, size);
            OSSL_PARAM params[2] = {
                OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16), OSSL_PARAM_construct_end()};
            EVP_DecryptInit_ex2(dec, NULL, NULL, iv, params);
            EVP_DecryptUpdate(dec, NULL, &w, aad, 12);
            EVP_DecryptUpdate(dec, buf, &w, buf, size);
            failures += EVP_DecryptFinal_ex(dec, buf + size, &w) <= 0;
        }
        keep(1, now() - t);

        t = now();
        for (int i = 0; i < N; i++) {
            memcpy(buf, plain, size);
            EVP_EncryptInit_ex(enc, NULL, NULL, NULL, iv);
            EVP_EncryptUpdate(enc, NULL, &w, aad, 12);
            EVP_EncryptUpdate(enc, buf, &w, buf, size);
            EVP_EncryptFinal_ex(enc, buf + size, &w);
            EVP_CIPHER_CTX_ctrl(enc, EVP_CTRL_GCM_GET_TAG, 16, buf + size);
        }
        keep(2, now() - t);

        t = now();
        for (int i = 0; i < N; i++) EVP_DecryptInit_ex(dec, NULL, NULL, NULL, iv);
        keep(3, now() - t);
        t = now();
        for (int i = 0; i < N; i++) EVP_CIPHER_CTX_ctrl(dec, EVP_CTRL_GCM_SET_TAG, 16, tag);
        keep(4, now() - t);
        t = now();
        for (int i = 0; i < N; i++) EVP_DecryptUpdate(dec, NULL, &w, aad, 12);
        keep(5, now() - t);
        t = now();
        for (int i = 0; i < N; i++) {
            EVP_DecryptInit_ex(dec, NULL, NULL, NULL, iv);
            EVP_DecryptFinal_ex(dec, buf, &w);
        }
        keep(6, now() - t);
    }
    printf("payload %d bytes, ns per packet (best of %d rounds of %d)\n", size, ROUNDS, N);
    printf("unprotect (init iv, aad, update, SET_TAG, final): %.0f%s\n", best[0], failures ? "  (FAILURES)" : "");
    printf("unprotect, tag as DecryptInit_ex2 parameter:      %.0f\n", best[1]);
    printf("protect (init iv, aad, update, final, GET_TAG):   %.0f\n", best[2]);
    printf("  init with IV alone:                             %.0f\n", best[3]);
    printf("  SET_TAG alone:                                  %.0f\n", best[4]);
    printf("  12-byte AAD update alone:                       %.0f\n", best[5]);
    printf("  init + final (empty message):                   %.0f\n", best[6]);
    EVP_CIPHER_CTX_free(enc);
    EVP_CIPHER_CTX_free(dec);
    return failures != 0;
}
