"""attnbook: one-layer softmax attention with trained embeddings, in code.

The package holds every computation the book's chapters run.

Model and data representation
- :mod:`attnbook.counts`      -- the bag-of-tokens (CSR count) representation of sequences;
- :mod:`attnbook.model`       -- the model ``f(X)``: a dense reference and the fast count engine;
- :mod:`attnbook.multiclass`  -- the K-class model and the cross-entropy loss;
- :mod:`attnbook.losses`      -- the logistic loss, accuracy and label checks;
- :mod:`attnbook.train`       -- parameter initialization and the one full-batch training loop.

Theory
- :mod:`attnbook.theory`      -- facade over the closed forms below;
- :mod:`attnbook.frequency`   -- the average signed frequency ``alpha``;
- :mod:`attnbook.one_step`    -- one gradient step on the embeddings and its prediction;
- :mod:`attnbook.max_margin`  -- the max-margin token-selection problem (QP) and its KKT check;
- :mod:`attnbook.flow`        -- gradient flow on the ``<cls>`` vector with frozen embeddings.

Data
- :mod:`attnbook.synthetic`      -- positive / negative / neutral synthetic sequences (and K classes);
- :mod:`attnbook.selection_data` -- data satisfying Assumption 1 exactly, and controlled violations;
- :mod:`attnbook.xor_data`       -- a task whose label depends on a pair of tokens;
- :mod:`attnbook.data`           -- real reviews (IMDB, Yelp): loading, tokenizer, vocabulary;
- :mod:`attnbook.reviews`        -- a prepared review corpus and the real-data experiment;
- :mod:`attnbook.importance`     -- token importance, binning, rank correlations, binned plots.

Extensions
- :mod:`attnbook.two_layer`   -- a first self-attention layer before the ``<cls>`` layer;
- :mod:`attnbook.mlp_head`    -- an MLP head after the attention;
- :mod:`attnbook.extensions`  -- four-class maps and trend statistics of the extensions chapter.

The book itself
- :mod:`attnbook.utils`      -- seeding and devices;
- :mod:`attnbook.plotting`   -- one figure style for the whole book;
- :mod:`attnbook.report`     -- glue numbers into the prose, assert the book's checks, keep records;
- :mod:`attnbook.dashboard`  -- the claims dashboard built from the records;
- :mod:`attnbook.sphinxext`  -- the Sphinx hook that renders the dashboard at build time;
- :mod:`attnbook.bench`      -- ``python -m attnbook.bench``: count engine against the usual implementation.
"""

__version__ = "0.1.0"
