#pragma once
// The PCI bus id of a CUDA device, which names the same device to NVML (CUDA's and NVML's
// device numbers differ in general). A plain C++ header for psi_engine.
#include <string>

namespace psi::rt {

// "0000:3b:00.0" for CUDA device `device`; empty, with CUDA's reason in *why, when it cannot say.
std::string cuda_pci_bus_id(int device, std::string* why);

}  // namespace psi::rt
