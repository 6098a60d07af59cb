#pragma once
// Where a model's memory goes: weights, activations and their lifetimes.
//
// Semantics (docs/inspect.md documents them for users):
//  * Weights are initializers, Constant outputs and outputs of nodes whose
//    inputs are all weights, each counted once. Resident weights are those a
//    computing node (one with an output that is not a weight) reads, in this
//    graph or, through implicit inputs, in a subgraph.
//  * Activations are graph inputs and every other node output. Node indices
//    follow file order. An activation produced by node p (graph inputs: 0)
//    and last read by node c (graph outputs: the last node) is live at every
//    index in [p, c]; one nobody reads is live at [p, p].
//  * Peak live bytes is the largest sum of live activations over node indices.
//  * A node with subgraphs adds, at its own index, the largest peak among its
//    subgraphs (the larger branch of an If, one iteration of a Loop/Scan).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/model/dtype.h"
#include "gpumem/model/graph.h"

namespace gpumem {

struct PricingOptions {
  // Re-price floating tensors as if the model were converted (--dtype).
  std::optional<DType> weights_as;
  std::optional<DType> activations_as;
};

// Bytes of a tensor under the pricing options; nullopt when its shape or
// element size is unknown.
std::optional<uint64_t> priced_bytes(const Tensor& t, std::optional<DType> reprice_as);
// Its element type under them: floating tensors take `reprice_as`.
DType priced_dtype(const Tensor& t, std::optional<DType> reprice_as);

struct DTypeTotals {
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

struct WeightsSummary {
  uint64_t count = 0;  // weight tensors with a known size
  uint64_t elements = 0;
  uint64_t bytes = 0;
  std::map<DType, DTypeTotals> by_dtype;  // by the dtype after re-pricing
  // Of the above, what nodes compute from weights alone (a Transpose of a
  // Linear weight, an exporter's Identity of a deduplicated tensor): the file
  // does not store these; a runtime that folds constants computes them once.
  DTypeTotals derived;
  std::map<std::string, DTypeTotals> derived_by_op;
  // What a runtime keeps in memory while it runs: every weight a computing
  // node reads (or the graph returns), after constant folding. A weight read
  // only by folding nodes (the source of a folded Transpose) is dropped once
  // folded; the folded result replaces it.
  DTypeTotals resident;
  std::vector<std::string> unknown;  // names of weights whose size is unknown
};

struct Activation {
  int tensor = -1;  // id in the main graph
  uint64_t bytes = 0;
  int first = 0;  // node index where it becomes live
  int last = 0;   // last node index where it is live (inclusive)
};

struct SubgraphCharge {
  int node = -1;             // the If/Loop/Scan node
  uint64_t bytes = 0;        // largest subgraph peak, charged at `node`
  int subgraphs = 0;         // branches considered
  bool has_unknown = false;  // a subgraph tensor of unknown size
};

struct TimelinePoint {
  int node = 0;
  uint64_t live_bytes = 0;  // activations live here, subgraph charge included
};

struct MemoryAnalysis {
  PricingOptions pricing;  // what the figures below were priced with
  WeightsSummary weights;
  std::vector<Activation> activations;   // known sizes, in tensor-id order
  std::vector<int> unknown_activations;  // tensor ids of unknown size
  uint64_t total_activation_bytes = 0;   // sum over `activations` (no reuse)
  uint64_t peak_live_bytes = 0;
  int peak_node = -1;                   // first node index where the peak occurs; -1: no nodes
  std::vector<TimelinePoint> timeline;  // one per node
  std::vector<SubgraphCharge> subgraph_charges;
  // True when some size is unknown: totals above are then lower bounds.
  bool lower_bound() const;
};

MemoryAnalysis analyze_memory(const Graph& graph, const PricingOptions& pricing = {});

}  // namespace gpumem
