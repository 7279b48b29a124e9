/*
 * fuzz.h — the fuzz targets' common entry (libFuzzer's). Built two ways
 * (tests/fuzz.cmake): with libFuzzer for `make fuzz`, and with replay.c as
 * main for ctest, which runs each target over its seed corpus and the
 * regression inputs (tests/fuzz/regress/TARGET/: every crash a fuzz run
 * found, kept after its fix).
 */
#ifndef DISC_FUZZ_H
#define DISC_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
