"""The kernel test harness: how far an InfoNCE or MaxSim implementation is from the float64 reference, the
kernel bench, and the compile report of the Triton kernels (``python -m`` tools, the GPU check, the tests).

* :mod:`.accuracy`: the error bounds (one definition of "matches"), case builders and sweeps of the InfoNCE loss;
* :mod:`.maxsim_accuracy`: the same for the MaxSim InfoNCE loss;
* :mod:`.bench`: ``scripts/bench_kernel.py``'s check and time / memory table;
* :mod:`.compile_report`: registers, shared memory and spills of every autotuning config.
"""
