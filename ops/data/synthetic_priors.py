"""What the synthetic source draws its marginals and planted demographic effects from
(`ops.data.synthetic`): ML-1M's code-set frequencies and rating shares, the genres that go
together, and how gender, age and occupation shift a user's genre taste and era."""

from __future__ import annotations

# Code-set frequencies of ML-1M users.dat / movies.dat (6,040 users, 3,883 movies), used as
# the defaults so that the synthetic demographics and catalogue look like ML-1M.
ML1M_AGE_COUNTS = {1: 222, 18: 1103, 25: 2096, 35: 1193, 45: 550, 50: 496, 56: 380}
ML1M_OCCUPATION_COUNTS = (
    711,
    528,
    267,
    173,
    759,
    112,
    236,
    679,
    17,
    92,
    195,
    129,
    388,
    142,
    302,
    144,
    241,
    502,
    70,
    72,
    281,
)
ML1M_ZIP_FIRST_DIGIT_COUNTS = (662, 662, 441, 386, 607, 659, 430, 419, 306, 1468)
ML1M_GENRE_COUNTS = {
    "Drama": 1603,
    "Comedy": 1200,
    "Action": 503,
    "Thriller": 492,
    "Romance": 471,
    "Horror": 343,
    "Adventure": 283,
    "Sci-Fi": 276,
    "Children's": 251,
    "Crime": 211,
    "War": 143,
    "Documentary": 127,
    "Musical": 114,
    "Mystery": 106,
    "Animation": 105,
    "Fantasy": 68,
    "Western": 68,
    "Film-Noir": 44,
}

# Genres that appear together in ML-1M titles ("Action|Adventure|Sci-Fi", "Animation|Children's").
GENRE_COMPANIONS = {
    "Action": ("Adventure", "Thriller", "Sci-Fi", "Crime", "War"),
    "Adventure": ("Action", "Fantasy", "Children's", "Sci-Fi"),
    "Animation": ("Children's", "Comedy", "Musical", "Fantasy"),
    "Children's": ("Animation", "Comedy", "Adventure", "Fantasy", "Musical"),
    "Comedy": ("Romance", "Drama", "Children's", "Crime"),
    "Crime": ("Drama", "Thriller", "Film-Noir", "Action"),
    "Documentary": ("Drama", "War", "Musical"),
    "Drama": ("Romance", "Crime", "War", "Thriller", "Comedy"),
    "Fantasy": ("Adventure", "Children's", "Comedy", "Sci-Fi"),
    "Film-Noir": ("Crime", "Mystery", "Thriller"),
    "Horror": ("Thriller", "Sci-Fi", "Mystery", "Comedy"),
    "Musical": ("Comedy", "Romance", "Children's", "Animation"),
    "Mystery": ("Thriller", "Crime", "Film-Noir", "Horror"),
    "Romance": ("Comedy", "Drama", "Musical"),
    "Sci-Fi": ("Action", "Adventure", "Horror", "Thriller"),
    "Thriller": ("Crime", "Action", "Mystery", "Horror", "Drama"),
    "War": ("Drama", "Action", "Romance"),
    "Western": ("Action", "Adventure", "Comedy"),
}

# Additive shifts of the log-prior of a user's favourite genres by demographic group.
# Directions follow the ML-1M rating patterns (women rate more romance and musicals, teens
# more horror, older users more westerns, war films and noir, programmers more sci-fi).
GENDER_GENRE_SHIFT = {
    "F": {
        "Romance": 1.0,
        "Drama": 0.4,
        "Musical": 0.8,
        "Children's": 0.4,
        "Comedy": 0.2,
        "Action": -0.6,
        "War": -0.7,
        "Western": -0.6,
        "Sci-Fi": -0.5,
        "Horror": -0.3,
    },
    "M": {"Action": 0.4, "Sci-Fi": 0.4, "War": 0.4, "Western": 0.3, "Crime": 0.2, "Romance": -0.4, "Musical": -0.4},
}
AGE_GENRE_SHIFT = {
    1: {
        "Children's": 1.5,
        "Animation": 1.5,
        "Comedy": 0.5,
        "Fantasy": 0.6,
        "Drama": -0.8,
        "Film-Noir": -1.5,
        "War": -0.8,
        "Documentary": -1.0,
        "Western": -0.8,
    },
    18: {
        "Comedy": 0.5,
        "Horror": 0.9,
        "Action": 0.5,
        "Sci-Fi": 0.4,
        "Thriller": 0.3,
        "Western": -0.8,
        "Film-Noir": -0.8,
        "Musical": -0.5,
        "War": -0.3,
    },
    25: {"Action": 0.3, "Thriller": 0.3, "Crime": 0.3, "Sci-Fi": 0.2, "Western": -0.4},
    35: {"Drama": 0.3, "Crime": 0.2, "Mystery": 0.2},
    45: {"Drama": 0.5, "War": 0.4, "Mystery": 0.4, "Western": 0.3, "Horror": -0.4, "Animation": -0.3},
    50: {
        "Drama": 0.5,
        "War": 0.6,
        "Western": 0.6,
        "Film-Noir": 0.5,
        "Musical": 0.4,
        "Mystery": 0.4,
        "Horror": -0.8,
        "Animation": -0.5,
    },
    56: {
        "War": 0.9,
        "Western": 1.0,
        "Film-Noir": 0.9,
        "Musical": 0.8,
        "Documentary": 0.5,
        "Horror": -1.0,
        "Sci-Fi": -0.5,
        "Animation": -0.7,
    },
}
OCCUPATION_GENRE_SHIFT = {
    1: {"Documentary": 0.7, "Drama": 0.3},
    2: {"Film-Noir": 0.6, "Animation": 0.4, "Documentary": 0.4},
    4: {"Comedy": 0.3, "Sci-Fi": 0.2},
    6: {"Drama": 0.3, "Mystery": 0.3},
    9: {"Romance": 0.5, "Children's": 0.5},
    10: {"Children's": 0.8, "Animation": 0.7},
    11: {"Crime": 0.5, "Thriller": 0.4},
    12: {"Sci-Fi": 0.9, "Fantasy": 0.4, "Action": 0.2},
    13: {"Western": 0.6, "War": 0.5, "Musical": 0.4},
    15: {"Sci-Fi": 0.7, "Documentary": 0.5},
    17: {"Sci-Fi": 0.6, "Action": 0.3},
    20: {"Drama": 0.5, "Film-Noir": 0.5, "Documentary": 0.4},
}
# Occupations made likelier at some ages (K-12 students are under 18, retirees 56+).
OCCUPATION_AGE_BOOST = {
    1: {10: 25.0, 19: 2.0},
    18: {4: 4.0, 10: 0.5},
    25: {4: 0.7},
    50: {13: 3.0},
    56: {13: 12.0, 4: 0.1, 10: 0.0},
}
# Centre of the preferred release decade by age code: people prefer films of their youth.
ERA_CENTRE_BY_AGE = {1: 1993, 18: 1990, 25: 1985, 35: 1978, 45: 1970, 50: 1964, 56: 1955}
# ML-1M rating shares of 1..5 (1,000,209 ratings): 1: 5.6 %, 2: 10.8 %, 3: 26.1 %, 4: 34.9 %, 5: 22.6 %.
ML1M_RATING_SHARES = (0.056, 0.108, 0.261, 0.349, 0.226)
