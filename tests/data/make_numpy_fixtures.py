# Writes the numpy-made .npy fixtures of tests/test_npy.cpp: an independent writer to check sparsim's reader
# and writer against. Run from this folder with numpy installed (apt-get install python3-numpy); the files are
# committed, so the tests do not need numpy.
import numpy as np
from numpy.lib import format as npf

np.save("numpy_f4_2x3.npy", ((np.arange(6, dtype="<f4") - 2.5) * 0.75).reshape(2, 3))
np.save("numpy_f4_empty.npy", np.zeros((0,), dtype="<f4"))
np.save("numpy_f8_4.npy", np.array([0.1, -2.5, 1e300, 3.0], dtype="<f8"))
np.save("numpy_f2_5.npy", np.array([1.0, -2.0, 65504.0, 2.0**-24, 0.1], dtype="<f2"))
with open("numpy_v2_f4_2x2x2.npy", "wb") as f:
    npf.write_array(f, np.arange(8, dtype="<f4").reshape(2, 2, 2) / np.float32(4), version=(2, 0))
