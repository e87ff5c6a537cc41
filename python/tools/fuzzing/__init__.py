"""Fuzz every reader of OCF with mutated files, each read in a capped child process.

    python python/tools/fuzz.py --seconds 600 [--seed N] [--artifacts DIR] [--json]

Modules: seeds (valid files of every format), mutations, readers (what a child
reads, and what the files justify), worker (the capped child), campaign (the
loop, the summary, the command line).

Seeds are generated, not downloaded: valid checkpoints of every format the
project reads (OCF single file and directory, with zstd, slices, byte
strings, metadata and an object graph; a TensorFlow bundle with its object
graph; safetensors; npz, stored and deflated). Each input is a seed with one
of its files mutated: bit flips, bytes and integers set to edge values,
truncation, insertion, deletion, duplication, splicing, and for OCF a
protobuf-aware change of one index field with the index checksum and footer
kept consistent, so that inputs get past the checksum into the parser and
the table checks. Chunk and TensorFlow checksums are skipped for a quarter
of the inputs (verify=False), so damaged data reaches the decoders.

Each input is read by a forked child with every read its format offers. The
child's address space (RLIMIT_AS) is capped at what it maps plus what the
files justify (a few copies of their bytes and of what their compressed
blocks may decode to: raw length up to 32768 times the stored length for an
OCF zstd block, 1032 times the file for npz), and the parent kills it after
``--timeout`` seconds. An input fails the run when:

- an exception other than ocf.OCFError escapes (an *escape*);
- the child is killed by the time limit (a *hang*) or dies otherwise (a *crash*);
- it runs out of memory while the files justify less than its cap, or its
  peak resident memory grows by more than they justify (*over-allocation*).

Failing inputs are written to ``--artifacts`` with the traceback. The
summary counts inputs, outcomes by error category, and failures, and the
exit status is 1 when anything failed. python/tests/hostile_input/test_fuzz.py runs this
script for a few seconds in the test command.
"""
