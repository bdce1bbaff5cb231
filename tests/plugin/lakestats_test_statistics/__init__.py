"""Two user-defined statistics: one with a built-in merge, one with a merge of its own."""
import pyarrow.compute as pc

from lakestats.udf import statistic

EMAIL = r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$"


@statistic(name="email_valid_count", types=["string", "large_string"], merge="sum")
def email_valid_count(values):
    return pc.sum(pc.match_substring_regex(values, EMAIL)).as_py() or 0


def _longest(a, b):
    """The state is [most words, the smallest value with that many]."""
    if a[0] != b[0]:
        return a if a[0] > b[0] else b
    return a if a[1] <= b[1] else b


@statistic(name="max_word_count", types=["string"], merge=_longest, finish=lambda s: s[0])
def max_word_count(values):
    words = pc.list_value_length(pc.utf8_split_whitespace(values))
    most = pc.max(words).as_py()
    return [most, pc.min(values.filter(pc.equal(words, most))).as_py()]
