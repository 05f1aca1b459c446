"""The core floor: the entry format and opcode registry, per-thread state, the tape,
the Tensor type, dtype rules, slot descriptors and the random generator.  It
imports nothing of tapegrad above it (see docs/architecture.md)."""
