/* A stand-in for Windows 10's bcryptprimitives.dll, which Wine 8 (Debian 12) lacks and which
 * Rust's standard library imports for ProcessPrng. Used only to run the Windows test binaries
 * under Wine in CI; it forwards to RtlGenRandom (advapi32's SystemFunction036). */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
