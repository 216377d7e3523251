#!/usr/bin/python3
"""Reads a DICOM SEG back with pydicom and checks it against its source series.

usage: check_dicom_seg.py SEG.dcm SOURCE_DICOM_DIR [--volumes-json J] [--labels-nii L.nii.gz]

Checks: SEG SOP class; Frame of Reference UID equal to the source's; the
Referenced Series Sequence names the source series and exactly its SOP
Instances; every frame's Plane Position (Patient) equals a source slice's
ImagePositionPatient (1e-3 mm) and its Derivation Image reference names that
slice; the shared orientation equals the source's. With --volumes-json
(`segment`'s *_volumes.json): voxels per segment equal the label map's, empty
labels absent. With --labels-nii: the decoded frames, placed on the source
slices, equal the label volume voxel for voxel. Exit 0 when all pass; prints
one line per check.
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import pydicom

SEG_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"
failures = []


def ok(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def read_nifti(path):
    raw = open(path, "rb").read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    dim = struct.unpack_from("<8h", raw, 40)
    dtype = {2: np.uint8, 4: np.int16, 8: np.int32, 256: np.int8, 512: np.uint16, 768: np.uint32}[
        struct.unpack_from("<h", raw, 70)[0]]
    off = int(struct.unpack_from("<f", raw, 108)[0])
    nx, ny, nz = dim[1], dim[2], dim[3]
    return np.frombuffer(raw, dtype=dtype, count=nx * ny * nz, offset=off).reshape(nz, ny, nx)  # [k, row(j), col(i)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("seg")
    ap.add_argument("source")
    ap.add_argument("--volumes-json")
    ap.add_argument("--labels-nii")
    a = ap.parse_args()

    src = []
    for f in sorted(os.listdir(a.source)):
        p = os.path.join(a.source, f)
        if os.path.isfile(p):
            src.append(pydicom.dcmread(p, stop_before_pixels=True))
    normal = np.cross(np.array(src[0].ImageOrientationPatient[:3], float), np.array(src[0].ImageOrientationPatient[3:], float))
    src.sort(key=lambda d: float(np.dot(normal, np.array(d.ImagePositionPatient, float))))  # position order, as the series reader

    seg = pydicom.dcmread(a.seg)
    ok(seg.SOPClassUID == SEG_CLASS, "SOP class is Segmentation Storage")
    ok(seg.FrameOfReferenceUID == src[0].FrameOfReferenceUID, "Frame of Reference UID equals the source's")
    ok(seg.StudyInstanceUID == src[0].StudyInstanceUID, "Study Instance UID equals the source's")
    refs = seg.ReferencedSeriesSequence
    ok(len(refs) == 1 and refs[0].SeriesInstanceUID == src[0].SeriesInstanceUID, "Referenced Series Sequence names the source series")
    ref_uids = sorted(r.ReferencedSOPInstanceUID for r in refs[0].ReferencedInstanceSequence)
    ok(ref_uids == sorted(d.SOPInstanceUID for d in src), f"referenced SOP Instance UIDs equal the source series' ({len(ref_uids)})")

    shared = seg.SharedFunctionalGroupsSequence[0]
    iop = [float(x) for x in shared.PlaneOrientationSequence[0].ImageOrientationPatient]
    ok(np.allclose(iop, [float(x) for x in src[0].ImageOrientationPatient], atol=1e-5), "shared Plane Orientation equals the source's")

    positions = np.array([[float(x) for x in d.ImagePositionPatient] for d in src])
    frames = seg.pixel_array
    if frames.ndim == 2:
        frames = frames[None]
    nframes = int(seg.NumberOfFrames)
    ok(frames.shape == (nframes, src[0].Rows, src[0].Columns), f"{nframes} frames of {src[0].Rows}x{src[0].Columns}")
    names = {int(s.SegmentNumber): s.SegmentLabel for s in seg.SegmentSequence}
    volume = np.zeros((len(src), src[0].Rows, src[0].Columns), np.int32)
    counts = {n: 0 for n in names}
    pos_ok = deriv_ok = True
    worst = 0.0
    for f, item in enumerate(seg.PerFrameFunctionalGroupsSequence):
        ipp = np.array([float(x) for x in item.PlanePositionSequence[0].ImagePositionPatient])
        d = np.abs(positions - ipp).max(axis=1)
        k = int(d.argmin())
        worst = max(worst, float(d[k]))
        pos_ok &= bool(d[k] <= 1e-3)
        sop = item.DerivationImageSequence[0].SourceImageSequence[0].ReferencedSOPInstanceUID
        deriv_ok &= sop == src[k].SOPInstanceUID
        n = int(item.SegmentIdentificationSequence[0].ReferencedSegmentNumber)
        mask = frames[f] != 0
        counts[n] += int(mask.sum())
        volume[k][mask] = n
    ok(pos_ok, f"every frame's Plane Position equals its source slice's ImagePositionPatient (max diff {worst:.2g} mm)")
    ok(deriv_ok, "every frame's Derivation Image Sequence references that source slice")
    print("     segments: " + ", ".join(f"{n} {names[n]} {counts[n]} voxels" for n in sorted(names)))

    if a.volumes_json:
        labels = json.load(open(a.volumes_json))["labels"]
        want = {l["name"]: l["voxels"] for l in labels if l["label"] != 0 and l["voxels"] > 0}
        got = {names[n]: counts[n] for n in names}
        ok(got == want, f"voxels per segment equal the label map's ({len(want)} non-empty labels; empty labels omitted)")
    if a.labels_nii:
        lab = read_nifti(a.labels_nii)
        ok(lab.shape == volume.shape, f"label volume shape {lab.shape} equals the series' {volume.shape}")
        if lab.shape == volume.shape:
            # segment numbers → label values by name order: the writer numbers non-empty labels in increasing order
            values = [int(v) for v in np.unique(lab) if v != 0]
            mapped = np.zeros_like(volume)
            for n, v in zip(sorted(names), values):
                mapped[volume == n] = v
            ok(len(values) == len(names), f"{len(names)} segments for {len(values)} non-zero labels")
            want = {v: int((lab == v).sum()) for v in values}
            got = {v: int((mapped == v).sum()) for v in values}
            ok(got == want, f"voxels per segment equal the NIfTI label volume's {want}")
            ok(bool((mapped == lab).all()), "decoded frames equal the label volume voxel for voxel")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
