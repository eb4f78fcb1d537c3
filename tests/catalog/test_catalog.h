// Shared by the catalog tests: the real models/ catalog, loaded once.
#pragma once

#include <gtest/gtest.h>

#include "catalog/catalog.h"

namespace skyrl::catalog::testing {

inline const Catalog& RealCatalog() {
  static const Catalog* c = [] {
    absl::StatusOr<Catalog> loaded = Catalog::LoadDir(SKYRL_TEST_MODELS_DIR);
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status();
      std::abort();
    }
    return new Catalog(std::move(*loaded));
  }();
  return *c;
}

}  // namespace skyrl::catalog::testing
