"""The result types of every front: each field defined once, one class per problem kind.

A result class is a list of `Field` s (name, shape and meaning, and how one object
takes it). `BatchResult` gives every class what follows from that list: its
construction, the single-object form, ``success``, ``messages()``, ``repr``, ``len``,
``res[i]`` (an `ObjectResult`) and a flat ``{name: array}`` form (`BatchResult.arrays`)
through which the Dask view computes and writes the fields and the JAX view flattens
them as a pytree. `IVPResult` is ``solve_ivp``'s; ``hapsira_cowell``'s ``CowellResult``
takes the shared fields below and adds the orbit's own. The Dask and JAX results
(``fronts/dask.py``, ``fronts/jax/pytree.py``) are subclasses holding other arrays.
"""

from typing import NamedTuple

import numpy as np

from . import dense as dense_output_module
from .layout import INFO, STATUS_MESSAGES

__all__ = ["BatchResult", "Field", "IVPResult", "ObjectResult", "Statuses"]

# How a field is taken for one object (``res[i]``, and a one-object call's result):
ROWS = "rows"            # object axis first: object i's row
COUNT = "count"          # one integer per object: a Python int
EVENTS = "events"        # one array per event, object axis first, NaN-padded: the recorded ones
TIMES = "times"          # (M,) shared, or (N, M) one row per object (trailing NaN padding)
ATTRIBUTE = "attribute"  # neither an array nor per object (an epoch): kept as it is


class Field(NamedTuple):
    """A result's field: its ``name``, ``role`` (how one object takes it) and ``doc``
    (shape and meaning, N the object axis). ``along_t``: its last axis runs along
    ``t``, so an object's padded output times trim it too."""

    name: str
    role: str
    doc: str
    along_t: bool = False


# the fields the problem kinds share (hapsira_cowell's CowellResult takes these too)
STATUS = Field("status", COUNT, "``(N,)`` ints: 0 reached the end, 1 stopped by a terminal "
                                "event, negative failed (their meaning: ``MESSAGES``)")
T_EVENTS = Field("t_events", EVENTS, "one ``(N, C)`` array per event: the times of its first "
                                     "C occurrences, NaN-padded")
N_EVENTS = Field("n_events", ROWS, "``(N, E)``: how many times each event occurred")
NFEV = Field("nfev", COUNT, "``(N,)``: evaluations of the right-hand side")
NSTEPS = Field("nsteps", COUNT, "``(N,)``: accepted steps")
NJEV = Field("njev", COUNT, "``(N,)``: Jacobian evaluations (0 for the explicit methods, "
                            "as scipy's)")
NLU = Field("nlu", COUNT, "``(N,)``: LU decompositions (0 for the explicit methods)")
# solve_ivp's own
T = Field("t", TIMES, "``(M,)``, or ``(N, M)`` with per-object spans, output times or "
                      "``t_eval=\"steps\"`` (``res.t[i]`` as given, trailing NaN included)")
Y = Field("y", ROWS, "``(N, n, M)``: ``res.y[i]`` laid out as scipy's ``sol.y``, NaN after "
                     "a terminal event or a failure", along_t=True)
Y_EVENTS = Field("y_events", EVENTS, "one ``(N, C, n)`` array per event: the states at "
                                     "``t_events``, NaN-padded")
STM = Field("stm", ROWS, "``(N, n, n, M)`` with ``stm=True`` (``stm[i, :, :, j]`` is "
                         "d y(t_j) / d y0 of object i), else None", along_t=True)
STM_EVENTS = Field("stm_events", EVENTS, "one ``(N, C, n, n)`` array per event with "
                                         "``stm=True`` (Phi at ``t_events``), else None")
STM_EVENTS_TOTAL = Field("stm_events_total", EVENTS, "one ``(N, C, n, n)`` array per event "
                                                     "with ``stm=True``: d y(t_event(y0)) / d y0, "
                                                     "the event's time moving with y0, else None")
DT_EVENTS_DY0 = Field("dt_events_dy0", EVENTS, "one ``(N, C, n)`` array per event with "
                                               "``stm=True``: d t_event / d y0, else None")


def _first(field, value, sequence):
    """``value`` of ``field`` for a result of one object: the object axis dropped."""
    if value is None or field.role == ATTRIBUTE:
        return value
    if field.role == EVENTS:
        return sequence(v[0] for v in value)
    if field.role == TIMES:
        return value[0] if value.ndim == 2 else value
    return value[0]


class BatchResult:
    """A result of N objects: the fields of ``FIELDS``, which every front fills with
    its own arrays (numpy, Dask or JAX); a field not computed is None.

    ``BatchResult(*values, single=False, **fields)``: values in ``FIELDS`` order,
    as given (`of_objects` drops the object axis for one object). ``single``: one
    object was given (``y0`` of shape ``(n,)``), its N axis dropped everywhere.
    """

    #: The fields, in the order of positional construction.
    FIELDS = ()
    #: What each ``status`` code means (a problem kind may word them for its users).
    MESSAGES = STATUS_MESSAGES
    #: The sequence type of per-event fields (the JAX view: tuples).
    EVENTS_TYPE = list

    def __init_subclass__(cls, **kwargs):
        """A class that defines ``FIELDS`` documents them: its docstring gets their list."""
        super().__init_subclass__(**kwargs)
        if "FIELDS" in cls.__dict__ and cls.__doc__:
            lines = "".join(f"    - ``{f.name}``: {f.doc}\n" for f in cls.FIELDS)
            cls.__doc__ = (f"{cls.__doc__.rstrip()}\n\n    Fields (for one object the "
                           f"leading N axis is dropped):\n\n{lines}")

    def __init__(self, *values, single=False, **fields):
        names = [f.name for f in self.FIELDS]
        kind = type(self).__name__
        if len(values) > len(names):
            raise TypeError(f"{kind}: {len(names)} fields ({', '.join(names)}), got "
                            f"{len(values)} values")
        given = dict(zip(names, values))
        for name, value in fields.items():
            if name not in names:
                raise TypeError(f"{kind}: no field {name!r} (fields: {', '.join(names)})")
            if name in given:
                raise TypeError(f"{kind}: field {name!r} given twice")
            given[name] = value
        for name in names:
            setattr(self, name, given.get(name))
        self.single = single

    @classmethod
    def of_objects(cls, single=False, **fields):
        """The result from arrays with the object axis first; for one object
        (``single``) that axis is dropped, as a front returns one object."""
        if single:
            fields = {f.name: _first(f, fields[f.name], cls.EVENTS_TYPE)
                      for f in cls.FIELDS if f.name in fields}
        else:
            fields = {f.name: (cls.EVENTS_TYPE(fields[f.name])
                               if f.role == EVENTS and fields[f.name] is not None
                               else fields[f.name]) for f in cls.FIELDS if f.name in fields}
        return cls(single=single, **fields)

    def _flat(self):
        """``(name, field, array)`` of every array held: per-event fields one per event
        (``t_events_0``, ...); None fields and attributes left out."""
        for field in self.FIELDS:
            value = getattr(self, field.name)
            if value is None or field.role == ATTRIBUTE:
                continue
            if field.role == EVENTS:
                for e, array in enumerate(value):
                    yield f"{field.name}_{e}", field, array
            else:
                yield field.name, field, value

    def arrays(self):
        """``{name: array}`` of every field held (``t_events`` as ``t_events_0``, ...;
        None fields and attributes left out): what the Dask view computes and writes."""
        return {name: array for name, _, array in self._flat()}

    def with_arrays(self, arrays, cls=None, single=None):
        """This result as ``cls`` (default its own class), its arrays taken from
        ``arrays`` (named as `arrays` names them), its attributes kept."""
        cls = type(self) if cls is None else cls
        fields = {}
        for field in cls.FIELDS:
            value = getattr(self, field.name)
            if value is None or field.role == ATTRIBUTE:
                fields[field.name] = value
            elif field.role == EVENTS:
                fields[field.name] = cls.EVENTS_TYPE(
                    arrays[f"{field.name}_{e}"] for e in range(len(value)))
            else:
                fields[field.name] = arrays[field.name]
        return cls(single=self.single if single is None else single, **fields)

    @property
    def success(self):
        """True where the object reached the end or a terminal event (an array of
        the front's kind)."""
        return self.status >= 0

    def messages(self):
        """The meaning of each object's status (a list, or a str for one object;
        reads the statuses: a Dask view computes them)."""
        status = np.asarray(self.status)
        if status.ndim == 0:
            return self.MESSAGES[int(status)]
        return [self.MESSAGES[int(s)] for s in status]

    def _summary(self):
        status = np.atleast_1d(np.asarray(self.status))
        counts = {int(s): int((status == s).sum()) for s in np.unique(status)}
        return f"objects={status.size}, status counts={counts}"

    def __repr__(self):
        return f"{type(self).__name__}({self._summary()})"

    def __len__(self):
        return 1 if self.single else self.status.shape[0]

    def __getitem__(self, i):
        """Object ``i`` (an `ObjectResult`): each field's row, counts as ints, events
        as the recorded occurrences."""
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"res[i]: expected an object's index (an int), got "
                            f"{type(i).__name__}")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"res[{i}]: the result holds {n} object(s)")
        return self._object(None if self.single else int(i) % n)

    def _object(self, i):
        """Object ``i`` (None: the one object of a single result); the views read
        their arrays first."""
        return ObjectResult(self, i)


#: The name of `BatchResult` in earlier versions (the statuses' helpers).
Statuses = BatchResult


class IVPResult(BatchResult):
    """What `solve_ivp()` returns, for N objects.

    ``res[i]`` is object ``i`` with the attribute names of scipy's ``OdeResult``
    (`ObjectResult`); ``success``, ``messages()``; ``sol``: scipy's ``sol`` with
    ``dense_output=True`` (`set_dense`), None otherwise.
    """

    FIELDS = (T, Y, STATUS, T_EVENTS, Y_EVENTS, N_EVENTS, NFEV, NSTEPS, STM, STM_EVENTS,
              NJEV, NLU, STM_EVENTS_TOTAL, DT_EVENTS_DY0)

    def __init__(self, *values, single=False, **fields):
        super().__init__(*values, single=single, **fields)
        #: scipy's ``sol`` with ``dense_output=True`` (`set_dense`); None otherwise
        self.sol = None

    @classmethod
    def from_kernel(cls, t, raw, single=False, **fields):
        """The result from the kernel's trimmed outputs (``raw``: ``y`` ``(N, M, n)``,
        ``info``, ``t_events`` ``(N, E, C)``, ``y_events``, ``n_events``; numpy, Dask
        or JAX arrays alike) and the output times ``t``; ``fields``: others, object
        axis first (``stm``, ``stm_events``, ``stm_events_total``, ``dt_events_dy0``)."""
        info = raw["info"]
        events = range(raw["t_events"].shape[1])
        return cls.of_objects(
            single, t=t, y=raw["y"].transpose(0, 2, 1), status=info[:, INFO.status],
            t_events=[raw["t_events"][:, e] for e in events],
            y_events=[raw["y_events"][:, e] for e in events], n_events=raw["n_events"],
            nfev=info[:, INFO.nfev], nsteps=info[:, INFO.nsteps], njev=info[:, INFO.njev],
            nlu=info[:, INFO.nlu], **fields)

    def set_dense(self, records):
        """Keep the step records of ``dense_output=True`` (``(method, n, fun, steps,
        dense, info)``, `.dense`): ``sol(t)`` gives ``(N, n, len(t))`` (``(N, n)``
        for a number; without the N axis for one object)."""
        self.sol = dense_output_module.BatchSolution(records, self.single)


class ObjectResult:
    """One object of a result (``res[i]``), each field under its own name: rows
    of the arrays, counts as Python ints, per-event fields as lists of the
    recorded occurrences, an object's padded output times (and the states along
    them) without the padding; ``message`` and ``success``. For `IVPResult` these
    are the attribute names of scipy's ``OdeResult``: ``t``, ``y`` ``(n, M)``,
    ``t_events`` (1-D arrays), ``y_events`` (``(k, n)``), ``status``, ``message``,
    ``success``, ``nfev``, ``njev``, ``nlu``, ``nsteps``, ``sol``."""

    def __init__(self, result, i):
        pick = (lambda a: a) if i is None else (lambda a: a[i])
        kept = None  # the object's output times, where its row of t is NaN-padded
        for field in result.FIELDS:
            t = getattr(result, field.name)
            if field.role == TIMES and t is not None:
                t = t if t.ndim == 1 else pick(t)
                if np.isnan(t[-1]):
                    kept = int(np.count_nonzero(~np.isnan(t)))
        counts = np.atleast_1d(pick(result.n_events))
        for field in result.FIELDS:
            value = getattr(result, field.name)
            if value is None or field.role == ATTRIBUTE:
                pass
            elif field.role == TIMES:
                value = (value if value.ndim == 1 else pick(value))[:kept]
            elif field.role == COUNT:
                value = int(pick(value))
            elif field.role == EVENTS:
                value = [pick(a)[:int(counts[e])] for e, a in enumerate(value)]
            else:
                value = pick(value)
                if field.along_t and kept is not None:
                    value = value[..., :kept]
            setattr(self, field.name, value)
        self.message = result.MESSAGES[self.status]
        self.success = self.status >= 0
        if hasattr(result, "sol"):
            #: scipy's ``OdeSolution`` of this object (``dense_output=True``), else None
            self.sol = (None if result.sol is None
                        else result.sol.object(0 if i is None else i))

    def __repr__(self):
        return f"ObjectResult(status={self.status}, nfev={self.nfev}, nsteps={self.nsteps})"
