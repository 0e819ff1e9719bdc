"""The `documents` recipe: a pretrained encoder fine-tuned on (query, passage) pairs cut from the corpus's own
long documents (title -> body, inverse cloze), in-batch contrastive with same-document negatives masked."""
