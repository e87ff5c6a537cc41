"""Generated from proto/ocf/tensorflow/v1: OCF's declarations of TensorFlow's messages."""
