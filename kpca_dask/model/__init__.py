"""The fitted model: how it is made, grown, checked and read by the outputs."""
