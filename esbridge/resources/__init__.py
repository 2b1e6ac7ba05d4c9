"""Engine artifacts (mappings, Painless scripts) shipped with the package."""
