#include <TH/THBlas.h>

#include <TH/generic/THBlas.cpp>
#include <TH/THGenerateAllTypes.h>

#include <TH/generic/THBlas.cpp>
#include <TH/THGenerateBFloat16Type.h>
