// Parameter counting from an Architecture. Pure functions; thread-safe.
//
// Counted: embeddings (twice when untied), per-layer mixers (attention, linear attention,
// Mamba-2), FFNs (dense, routed and shared experts, router), norms, MTP layers (each a full
// decoder layer plus its 2h x h projection) and the vision tower with its projector. Small
// terms (rotary tables, conv biases) are left out; they are far below the 5% tolerance.
#pragma once

#include <cstdint>

#include "catalog/catalog.h"

namespace skyrl::catalog {

struct ParamCounts {
  double dense = 0;           // everything that is not a routed expert, MTP or vision
  double experts = 0;         // routed experts, all of them
  double active_experts = 0;  // routed experts one token uses
  double mtp = 0;             // multi-token-prediction layers
  double vision = 0;          // vision tower and projector
  double embeddings = 0;      // input (+ output when untied) embedding matrices, in `dense`

  double total() const { return dense + experts + vision; }          // MTP excluded
  double active() const { return dense + active_experts + vision; }  // MTP excluded
};

ParamCounts CountParams(const Architecture& a);

// The model's counts as its publisher counts them (see CountConvention), for comparison with
// the stated figures.
double ComparableTotal(const ModelEntry& m, const ParamCounts& c);
double ComparableActive(const ModelEntry& m, const ParamCounts& c);

// LoRA adapter parameters at `rank` on every linear layer of the mixers and FFNs, split like
// the base: on dense layers, and on routed experts (sharded with the experts).
struct LoraCounts {
  double dense = 0;
  double experts = 0;
};
LoraCounts LoraParams(const Architecture& a, int rank);

// Layers that hold per-token state or activations (mixers), used by the activation model.
int MixerLayers(const Architecture& a);

// KV-cache bytes per token at 2 bytes per element (full-attention layers only), and how many
// ways an engine's GPUs can split it: KV heads for GQA (TP beyond them replicates); any number
// for MLA, whose engines run data-parallel attention (each rank keeps its own sequences'
// latents, as vLLM and SGLang do for DeepSeek-style models).
double KvBytesPerToken(const Architecture& a);
int KvShards(const Architecture& a);

// bf16 bytes of the largest single layer, for the ZeRO-3 gather working set.
double LargestLayerParams(const Architecture& a);

}  // namespace skyrl::catalog
