/*
 * no_dnnl.c — for the device check (run_on_device.sh): the GPU machine
 * has no oneDNN, so test_cudrv is built there from the runtime's sources
 * without dnnl.c, whose one function the rest calls is this (rt.c's
 * shutdown of the library's caches, which then hold nothing).
 */
void disc_rt_lib_shutdown(void);
void disc_rt_lib_shutdown(void)
{
}
