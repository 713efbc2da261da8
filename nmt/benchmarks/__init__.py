"""What ``python -m nmt.bench`` times, one module per part (``nmt.bench`` is the command line):

- ``timing``: the stopwatch every part shares (the fastest of interleaved rounds, the GEMM peak);
- ``cells``: one recurrent layer of every unit, forward + backward, against ``torch.nn.LSTM``;
- ``models``: whole models' training and decoding speed, FLOPs and activation memory;
- ``decoding``: beam search against the frozen baseline search that kept finished sentences;
- ``targets``: the project's speed targets, each with its ratio measured in the same run.
"""
