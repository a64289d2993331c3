"""The kernels' codes, without numba: a model's kind as the compiled step reads it (netfl/kernels/models.py)."""

ABSENT, EXTERNAL, NEVER, SESSIONS, DIURNAL, DAILY = -1, 0, 1, 2, 3, 4
#: Kinds of a session length (netfl/distributions.py's duration kinds): anything else draws as the uniform.
CONSTANT, EXPONENTIAL, LOGNORMAL, WEIBULL, UNIFORM = 0, 1, 2, 3, 4
DISTRIBUTIONS = {"constant": CONSTANT, "exponential": EXPONENTIAL, "lognormal": LOGNORMAL, "weibull": WEIBULL}
