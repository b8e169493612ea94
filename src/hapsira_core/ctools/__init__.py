"""The C side of foreign functions, without numba: `prototype` (the C types
hapsira passes), `sources` (a declaration as plain values, its translation units,
compiler diagnostics read back into the user's file and line) and `toolchain`
(the host C compiler and the shared library built once per source)."""
