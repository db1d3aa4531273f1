/*
 * Runs an ONNX model on frames through dynaspa's C ABI and prints every output.
 *
 *   cc -I android/include examples/c/run_frames.c -L target/release -ldynaspa_ffi -o run_frames
 *   LD_LIBRARY_PATH=target/release ./run_frames [-b BACKEND] [-t THREADS] [-d] [-n] MODEL FRAME...
 *
 * -b: the backend (default cpu); -t: CPU threads (default every core); -d: run densely;
 * -n: no tuned profile (calibrate the sparse ops at open).
 *
 * A FRAME is a .npy file (float32, C order) or a raw file of native float32s, holding one input
 * of the model; a model with k inputs takes k files per frame. Per frame it prints the latency
 * and mask density, then one line per output: its name, shape and values.
 */
#include "dynaspa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANK 8

static int fail(const char *what) {
    const char *msg = dynaspa_last_error();
    fprintf(stderr, "run_frames: %s: %s\n", what, msg ? msg : "(no message)");
    return 1;
}

/* Reads a whole file; NULL (with a message) on failure. */
static char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Loads `count` floats from a .npy (float32, C order, any shape of that size) or raw file. */
static int load_frame(const char *path, float *dst, size_t count) {
    size_t size, offset = 0;
    char *buf = read_file(path, &size);
    if (!buf) return -1;
    if (size >= 10 && memcmp(buf, "\x93NUMPY", 6) == 0) {
        const unsigned char *u = (const unsigned char *)buf;
        size_t prefix = u[6] == 1 ? 10 : 12, hlen = (size_t)u[8] | (size_t)u[9] << 8;
        if (prefix == 12 && size >= 12) hlen |= (size_t)u[10] << 16 | (size_t)u[11] << 24;
        offset = prefix + hlen;
        char *header = offset <= size ? malloc(hlen + 1) : NULL;
        if (header) {
            memcpy(header, buf + prefix, hlen);
            header[hlen] = 0;
        }
        int ok = header && strstr(header, "'descr': '<f4'") && !strstr(header, "'fortran_order': True");
        free(header);
        if (!ok) {
            fprintf(stderr, "%s: not a little-endian float32 C-order .npy\n", path);
            free(buf);
            return -1;
        }
    }
    if (size - offset != count * sizeof(float)) {
        fprintf(stderr, "%s: %zu bytes of data; the input needs %zu floats (%zu bytes)\n", path, size - offset,
                count, count * sizeof(float));
        free(buf);
        return -1;
    }
    memcpy(dst, buf + offset, count * sizeof(float));
    free(buf);
    return 0;
}

/* Element count of input or output `i`, its shape written to dims/rank. */
static int port(const dynaspa_session *s, int output, size_t i, int64_t *dims, size_t *rank, size_t *count) {
    *rank = MAX_RANK;
    int rc = output ? dynaspa_output_shape(s, i, dims, rank) : dynaspa_input_shape(s, i, dims, rank);
    if (rc != DYNASPA_OK) return rc;
    *count = 1;
    for (size_t d = 0; d < *rank; d++) *count *= (size_t)dims[d];
    return DYNASPA_OK;
}

int main(int argc, char **argv) {
    const char *backend = "cpu";
    dynaspa_options opts;
    dynaspa_options_init(&opts);
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "-b") && a + 1 < argc) backend = argv[++a];
        else if (!strcmp(argv[a], "-t") && a + 1 < argc) opts.threads = (uint32_t)atoi(argv[++a]);
        else if (!strcmp(argv[a], "-d")) opts.dense = 1;
        else if (!strcmp(argv[a], "-n")) opts.no_profile = 1;
        else break;
    }
    if (argc - a < 2) {
        fprintf(stderr, "usage: %s [-b BACKEND] [-t THREADS] [-d] [-n] MODEL FRAME...\n", argv[0]);
        return 2;
    }
    const char *model = argv[a++];

    dynaspa_session *s = NULL;
    if (dynaspa_open_with(model, backend, &opts, &s) != DYNASPA_OK) return fail("open");

    size_t n_in, n_out;
    if (dynaspa_input_count(s, &n_in) != DYNASPA_OK || dynaspa_output_count(s, &n_out) != DYNASPA_OK) return fail("counts");
    if ((size_t)(argc - a) % n_in != 0) {
        fprintf(stderr, "run_frames: the model has %zu inputs; give %zu files per frame\n", n_in, n_in);
        return 2;
    }
    float **in = calloc(n_in, sizeof *in), **out = calloc(n_out, sizeof *out);
    size_t *in_len = calloc(n_in, sizeof *in_len), *out_len = calloc(n_out, sizeof *out_len);
    int64_t dims[MAX_RANK];
    size_t rank;
    for (size_t i = 0; i < n_in; i++) {
        if (port(s, 0, i, dims, &rank, &in_len[i]) != DYNASPA_OK) return fail("input shape");
        in[i] = malloc(in_len[i] * sizeof(float));
    }
    for (size_t j = 0; j < n_out; j++) {
        if (port(s, 1, j, dims, &rank, &out_len[j]) != DYNASPA_OK) return fail("output shape");
        out[j] = malloc(out_len[j] * sizeof(float));
    }

    for (size_t frame = 0; a < argc; frame++) {
        for (size_t i = 0; i < n_in; i++, a++)
            if (load_frame(argv[a], in[i], in_len[i]) != 0) return 1;
        if (dynaspa_run_f32(s, (const float *const *)in, in_len, out, out_len) != DYNASPA_OK) return fail("run");
        dynaspa_report r;
        if (dynaspa_last_report(s, &r) != DYNASPA_OK) return fail("report");
        printf("frame %zu: %.3f ms, density %.3f, %u sparse ops\n", frame, r.latency_ms, r.density, r.sparse_ops);
        for (size_t j = 0; j < n_out; j++) {
            const char *name;
            if (dynaspa_output_name(s, j, &name) != DYNASPA_OK || port(s, 1, j, dims, &rank, &out_len[j]) != DYNASPA_OK)
                return fail("output");
            printf("output %s [", name);
            for (size_t d = 0; d < rank; d++) printf(d ? ",%lld" : "%lld", (long long)dims[d]);
            printf("]");
            for (size_t k = 0; k < out_len[j]; k++) printf(" %.9g", out[j][k]);
            printf("\n");
        }
    }

    for (size_t i = 0; i < n_in; i++) free(in[i]);
    for (size_t j = 0; j < n_out; j++) free(out[j]);
    free(in), free(out), free(in_len), free(out_len);
    dynaspa_close(s);
    return 0;
}
