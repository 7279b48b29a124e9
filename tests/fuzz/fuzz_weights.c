/*
 * fuzz_weights.c — the AOT weights-file reader (disc_aot_load_weights) on
 * arbitrary files. The first 16 bytes of the input say which size and
 * checksum the model expects (so that well-formed files are reachable),
 * the rest is the file.
 */
#include "fuzz.h"
#include "runtime/aot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 16)
        return 0;
    int64_t bytes, hash;
    memcpy(&bytes, data, 8);
    memcpy(&hash, data + 8, 8);
    char path[] = "/tmp/disc-fuzz-weights-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    size_t n = size - 16;
    if (write(fd, data + 16, n) != (ssize_t)n) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    void *slot = NULL;
    DiscAotModel m = {.abi = DISC_AOT_ABI, .name = "fuzz", .weights = &slot, .weights_bytes = bytes,
                      .weights_hash = hash};
    char err[256];
    if (disc_aot_load_weights(&m, path, err, sizeof err) == DISC_AOT_OK)
        disc_aot_unload_weights(&m);
    unlink(path);
    return 0;
}
