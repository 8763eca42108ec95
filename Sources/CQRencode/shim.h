#ifndef SCREENTIME_CQRENCODE_SHIM_H
#define SCREENTIME_CQRENCODE_SHIM_H

#include <qrencode.h>

#endif
