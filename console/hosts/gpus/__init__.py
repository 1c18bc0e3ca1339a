"""console.hosts.gpus.nvidia_smi"""
