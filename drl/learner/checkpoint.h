// Learner checkpoints: a small, documented, torch-free binary format (docs/aom.md, "Checkpoints").
//
// All integers and floats little-endian, in this order:
//   char[8]  "SHESHACK"
//   u32      format version (1)
//   u16      cluster_id, u16 zero
//   u32      model version
//   u64      env steps, u64 chunks applied (cumulative over resumes)
//   u32      length L, then L bytes: the environment id (a resume with another env is refused)
//   u64      parameter count N, then N f32 parameters (drl/model/model_types.h flat layout)
//   u32      optimizer slices S (one per chunk); each: u64 steps, u32 buffer count B, then B times
//            (u64 length M, M f32)
//   u64      FNV-1a 64 of every byte before it
// Written to FILE.tmp then renamed, so a crash mid-write leaves the previous checkpoint intact.
#pragma once

#include <string>

#include "learner/learner_core.h"

namespace shesha::learner {

bool save_checkpoint(const std::string& path, const LearnerState& state, const std::string& env_name,
                     std::string& error);
// False with a reason for a missing, truncated, corrupted or foreign file.
bool load_checkpoint(const std::string& path, LearnerState& state, std::string& env_name, std::string& error);

}  // namespace shesha::learner
