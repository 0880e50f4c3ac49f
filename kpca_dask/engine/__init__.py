"""The computation: seeded row sampling, bandwidth rules, the Nyström pass and solve."""
