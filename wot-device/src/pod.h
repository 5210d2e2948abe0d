/* pod.h - several devices in one container (pod.c). */
#ifndef POD_H
#define POD_H

typedef int (*device_main_fn)(int argc, char **argv);

/* `wot-device --pod -- ARGS [-- ARGS ...]`: one device process per segment; returns the pod's
 * exit code (0, or the first failing device's code). */
int pod_main(int argc, char **argv, device_main_fn device_main);

#endif
