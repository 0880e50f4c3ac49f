"""The scikit-learn estimators, KernelPCA and ExactKernelPCA: parameters in, a fitted model out."""
