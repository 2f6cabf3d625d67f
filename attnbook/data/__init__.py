"""Data: the label policy, real review corpora and the synthetic generators.

- :mod:`~attnbook.data.labels`    -- the one label policy (-1/+1, converted once at
  loading);
- :mod:`~attnbook.data.reviews`   -- IMDB and Yelp reviews: loading, tokenizer,
  vocabulary;
- :mod:`~attnbook.data.corpus`    -- a review corpus ready for the model (counts,
  labels, splits);
- :mod:`~attnbook.data.synthetic` -- positive / negative / neutral synthetic sequences
  (and K classes);
- :mod:`~attnbook.data.selection` -- data satisfying Assumption 1 exactly, and
  controlled violations;
- :mod:`~attnbook.data.xor`       -- a task whose label depends on a pair of tokens.

Layer: above :mod:`attnbook.engine`; imports nothing else of attnbook.
"""
