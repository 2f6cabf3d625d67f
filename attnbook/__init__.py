"""attnbook: one-layer softmax attention with trained embeddings, in code.

The package holds every computation the book's chapters run:

- :mod:`attnbook.counts`    -- the bag-of-tokens (CSR count) representation of sequences;
- :mod:`attnbook.model`     -- the model ``f(X)``, a dense reference and a fast count engine;
- :mod:`attnbook.losses`    -- the logistic loss and label checks;
- :mod:`attnbook.theory`    -- closed-form quantities of the theory (average signed frequency, ...);
- :mod:`attnbook.synthetic` -- synthetic data with positive, negative and neutral tokens;
- :mod:`attnbook.data`      -- real review data (IMDB, Yelp), tokenizer and vocabulary;
- :mod:`attnbook.utils`     -- seeding and devices;
- :mod:`attnbook.plotting`  -- one figure style for the whole book;
- :mod:`attnbook.report`    -- glue numbers into the prose and assert the book's checks.
"""

__version__ = "0.1.0"
