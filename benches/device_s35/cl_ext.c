/* Session 35: each OpenCL platform's devices and whether they report command buffers
 * (cl_khr_command_buffer) or recordable queues (cl_qcom_recordable_queues), the OpenCL
 * counterparts of CUDA graphs; the full extension list too. Built on the GPU host:
 * gcc cl_ext.c -I/usr/local/cuda/include -lOpenCL. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) { printf("no OpenCL platforms\n"); return 1; }
    for (cl_uint p = 0; p < np; ++p) {
        char name[256] = {0}, ver[256] = {0};
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name, NULL);
        clGetPlatformInfo(plats[p], CL_PLATFORM_VERSION, sizeof ver, ver, NULL);
        cl_device_id devs[8];
        cl_uint nd = 0;
        clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, devs, &nd);
        for (cl_uint d = 0; d < nd; ++d) {
            static char ext[65536];
            char dn[256] = {0}, dv[256] = {0};
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dn, dn, NULL);
            clGetDeviceInfo(devs[d], CL_DRIVER_VERSION, sizeof dv, dv, NULL);
            clGetDeviceInfo(devs[d], CL_DEVICE_EXTENSIONS, sizeof ext, ext, NULL);
            printf("%s (%s) / %s, driver %s: command buffers %s, recordable queues %s\n  %s\n", name, ver, dn, dv,
                   strstr(ext, "cl_khr_command_buffer") ? "yes" : "no", strstr(ext, "cl_qcom_recordable_queues") ? "yes" : "no", ext);
        }
    }
    return 0;
}
