"""The distributed algorithms, one package each, found whole: partition statistics, exact
frequencies, exact ranks. In each, the worker steps (`step`/`steps`) import only the protocol
and the format; the coordinator side (`driver`) reaches them only by their dotted names, as
StepEvents through an invoker."""
