"""Target-neutral kernel machinery: `kernel` (Arg, Columns, ObjectKernel, which each
target subclasses), `cache` (the on-disk kernel cache and its key), `fingerprint`
(a hash of what a compiled function computes) and `errors` (compile errors told in
the user's terms)."""
