"""The Hilbert (complex) EOF's computation: the analytic signal of each feature, the Hermitian
Gram matrix of a field, and the Hermitian landmark problem."""
