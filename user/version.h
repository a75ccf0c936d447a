#ifndef RFBPF_VERSION
#define RFBPF_VERSION "0.1.0"
#endif
