/*
 * files.h — what tests of the on-disk caches ask of a directory.
 */
#ifndef DISC_TEST_FILES_H
#define DISC_TEST_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* The files in dir whose names end in suffix; the path of the last one
 * listed in last. */
static inline int files_ending(const char *dir, const char *suffix, char *last, size_t size)
{
    DIR *dp = opendir(dir);
    int n = 0;
    size_t k = strlen(suffix);
    struct dirent *de;
    while (dp && (de = readdir(dp))) {
        size_t len = strlen(de->d_name);
        if (len > k && !strcmp(de->d_name + len - k, suffix)) {
            snprintf(last, size, "%s/%s", dir, de->d_name);
            n++;
        }
    }
    if (dp)
        closedir(dp);
    return n;
}

#endif
